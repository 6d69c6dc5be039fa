#!/usr/bin/env bash
# examples/gpt's checkpoint folder as careless users share it: a run prunes only its own
# checkpoints (an earlier, longer run's and a stranger's folder stay), a step another run wrote
# is kept aside, --resume=latest takes this run's newest sound checkpoint and says what it
# skipped (a stranger's folder, another run's checkpoint, a damaged one), a second live run on
# the folder is refused with exit 2 naming the first, and a killed run leaves no lock behind.
set -uo pipefail
gpt="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
ck="$tmp/ck"
tiny=(--width=32 --layers=1 --heads=2 --context=16 --batch_size=4 --eval_every=10 --eval_batches=1 --threads=1
      --devices=cpu:0 --checkpoint_dir="$ck" --checkpoint_every=10)
step() { printf '%s/step-%012d' "$ck" "$1"; }
run_of() {  # the run a checkpoint names in its training state's header
  /usr/bin/env python3 -c 'import json, struct, sys
f = open(sys.argv[1] + "/training_state.safetensors", "rb")
n = struct.unpack("<Q", f.read(8))[0]
print(json.loads(f.read(n))["__metadata__"]["run"])' "$1" 2>/dev/null
}
recorded_run() { sed -n 's/^run=//p' "$ck/.lock"; }
count_of_run() {  # step-N folders and those kept aside that name run $1
  local d n=0
  for d in "$ck"/step-*; do [[ "$(run_of "$d")" == "$1" ]] && n=$((n + 1)); done
  echo "$n"
}

# An earlier, longer run A: 40 steps, its newest two kept.
"$gpt" "${tiny[@]}" --seed=1 --steps=40 --keep_checkpoints=2 >"$tmp/a.out" 2>&1 || fail "run A: $(cat "$tmp/a.out")"
run_a=$(recorded_run)
[[ "$run_a" =~ ^[0-9a-f]{16}$ ]] || fail "run A recorded no run in the folder's lock: $(cat "$ck/.lock")"
[[ "$(run_of "$(step 40)")" == "$run_a" ]] || fail "step 40 does not name run A"
mkdir -p "$(step 999999999999)" && echo junk >"$(step 999999999999)/model.safetensors"

# A folder without a lock record (copied, or older than the record): --resume=latest takes only
# a checkpoint written with this run's settings.
mkdir -p "$tmp/copied" && cp -r "$(step 40)" "$tmp/copied/"
copied=("${tiny[@]/#--checkpoint_dir=*/--checkpoint_dir=$tmp/copied}")
"$gpt" "${copied[@]}" --seed=2 --steps=40 --resume=latest >"$tmp/other.out" 2>&1 || fail "other seed: $(cat "$tmp/other.out")"
grep -q "^gpt: --resume=latest: skipping $tmp/copied/step-000000000040: .* was written by a run with --seed=1; this run has --seed=2" \
  "$tmp/other.out" || fail "another run's checkpoint was not skipped: $(cat "$tmp/other.out")"
grep -q "resumed_from_step" "$tmp/other.out" && fail "resumed another run's checkpoint: $(tail -n 1 "$tmp/other.out")"
rm -rf "$tmp/copied" && mkdir -p "$tmp/copied" && cp -r "$(step 40)" "$tmp/copied/"
"$gpt" "${copied[@]}" --seed=1 --steps=40 --resume=latest >"$tmp/same.out" 2>&1 || fail "same seed: $(cat "$tmp/same.out")"
grep -q "resumed_from_step\":40" "$tmp/same.out" || fail "did not resume its own copied step 40: $(tail -n 1 "$tmp/same.out")"

# A fresh run B (another seed, 30 steps) in the same folder: A's step 30 is kept aside, not
# replaced; B prunes only its own; A's step 40 and the stranger stay.
"$gpt" "${tiny[@]}" --seed=2 --steps=30 --keep_checkpoints=2 >"$tmp/b.out" 2>&1 || fail "run B: $(cat "$tmp/b.out")"
run_b=$(recorded_run)
[[ -n "$run_b" && "$run_b" != "$run_a" ]] || fail "run B did not record a run of its own ($run_b)"
grep -q "^checkpoint: $(step 30) was written by another run (or is no readable checkpoint): kept as $(step 30).kept-" \
  "$tmp/b.out" || fail "A's step 30 was not kept aside with a note: $(cat "$tmp/b.out")"
kept=$(compgen -G "$(step 30).kept-*")
[[ -n "$kept" && "$(run_of "$kept")" == "$run_a" ]] || fail "A's step 30 is not what was kept aside"
[[ "$(run_of "$(step 40)")" == "$run_a" ]] || fail "B deleted A's step 40: $(ls -A "$ck")"
[[ -f "$(step 999999999999)/model.safetensors" ]] || fail "B deleted the stranger's folder"
[[ "$(run_of "$(step 20)")" == "$run_b" && "$(run_of "$(step 30)")" == "$run_b" ]] || fail "B's newest two are not there"
[[ -d "$(step 10)" ]] && fail "B kept its step 10 (--keep_checkpoints=2)"
cp "$(step 30)/model.safetensors" "$tmp/b30.safetensors"

# --resume=latest goes on with B, the folder's last run: skipping the stranger and A's step 40.
"$gpt" "${tiny[@]}" --seed=2 --steps=30 --keep_checkpoints=2 --resume=latest >"$tmp/latest.out" 2>&1 ||
  fail "resume latest: $(cat "$tmp/latest.out")"
grep -q "resumed_from_step\":30" "$tmp/latest.out" || fail "did not resume B's step 30: $(tail -n 1 "$tmp/latest.out")"
grep -q "^gpt: --resume=latest: skipping $(step 999999999999): " "$tmp/latest.out" ||
  fail "the stranger's folder was not named as skipped: $(cat "$tmp/latest.out")"
grep -q "^gpt: --resume=latest: skipping $(step 40): written by run $run_a, not by run $run_b, which last used" \
  "$tmp/latest.out" || fail "A's step 40 was not named as skipped: $(cat "$tmp/latest.out")"

# A damaged newest checkpoint of B: skipped, naming why; B's step 20 resumed, and step 30 comes
# out bit for bit as before.
python3 -c 'import sys
f = open(sys.argv[1], "r+b"); f.seek(-3, 2); b = f.read(1); f.seek(-3, 2); f.write(bytes([b[0] ^ 1]))' \
  "$(step 30)/model.safetensors"
"$gpt" "${tiny[@]}" --seed=2 --steps=30 --keep_checkpoints=2 --resume=latest >"$tmp/damaged.out" 2>&1 ||
  fail "resume past a damaged checkpoint: $(cat "$tmp/damaged.out")"
grep -q "^gpt: --resume=latest: skipping $(step 30): $(step 30): the checkpoint's files were changed or damaged" \
  "$tmp/damaged.out" || fail "the damaged checkpoint was not named as skipped: $(cat "$tmp/damaged.out")"
grep -q "resumed_from_step\":20" "$tmp/damaged.out" || fail "did not fall back to step 20: $(tail -n 1 "$tmp/damaged.out")"
cmp -s "$(step 30)/model.safetensors" "$tmp/b30.safetensors" || fail "step 30 again differs from B's own"

# A second live run on the folder is refused (exit 2) naming the first; once the first is
# killed, the folder is free.
"$gpt" "${tiny[@]}" --seed=3 --steps=10000000 --keep_checkpoints=1 >"$tmp/long.out" 2>&1 &
long=$!
for _ in $(seq 600); do grep -q "^pid=$long\$" "$ck/.lock" 2>/dev/null && break; sleep 0.05; done
grep -q "^pid=$long\$" "$ck/.lock" || fail "the long run did not record itself in 30 s: $(tail -n 3 "$tmp/long.out")"
err=$("$gpt" "${tiny[@]}" --seed=4 --steps=10 2>&1 >/dev/null); status=$?
[[ $status -eq 2 ]] || fail "a second run on a busy folder exited $status, not 2: $err"
[[ "$err" == "gpt: --checkpoint_dir=$ck: $ck is in use by another run: pid $long on host "*" (run "*"). Two runs"* ]] ||
  fail "the refusal does not name the first run: $err"
kill -KILL "$long"
wait "$long" 2>/dev/null
"$gpt" "${tiny[@]}" --seed=4 --steps=10 >"$tmp/after.out" 2>&1 || fail "the folder stayed locked: $(cat "$tmp/after.out")"
# The runs since kept aside what they met at their steps, but deleted nothing of A's or B's.
[[ "$(count_of_run "$run_a")" == 2 && "$(count_of_run "$run_b")" == 2 ]] ||
  fail "other runs' checkpoints were lost: $(ls -A "$ck")"

if ((failures)); then
  echo "$failures failure(s)"
  exit 1
fi
echo "PASS"
