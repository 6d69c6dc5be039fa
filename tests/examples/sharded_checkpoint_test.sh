#!/usr/bin/env bash
# examples/gpt's sharded training checkpoints (--shard=optimizer|gradients): each member's
# chunks in a file of its own plus index.json, written without a gather, in one process or
# several; resumed byte-equal on the same world size and stage, and onto other world sizes and
# stages (4 members ZeRO-2 -> 2 unsharded -> 1 device; 1 device -> 2 ZeRO-1 -> 4 ZeRO-2) to
# roundoff; consolidated into the unsharded form's model.safetensors byte for byte; a missing,
# damaged or non-covering shard refused with exit 2 and the folder untouched; --resume=latest
# past an index-less folder; pruning.
set -uo pipefail
gpt="$1"
launch="$2"
consolidate="$3"
compare="$4"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }
step() { printf '%s/step-%012d' "$1" "$2"; }

# --width=20: sizes such as 20 and 60 do not divide by 3 or 8 (padded chunks).
tiny=(--steps=12 --batch_size=8 --context=16 --layers=1 --heads=2 --width=20 --eval_every=4 --eval_batches=1 --threads=1)
one=(--devices=cpu:0)
two=(--devices=cpu:0,cpu:1)
four=(--devices=cpu:0,cpu:1,cpu:2,cpu:3)
run() {  # run NAME args...: output in $tmp/NAME.out, status returned
  local name="$1"; shift
  "$gpt" "${tiny[@]}" "$@" >"$tmp/$name.out" 2>&1
}
val_loss() { tail -n 1 "$tmp/$1.out" | sed 's/.*"val_loss":\([0-9.]*\).*/\1/'; }
within() {  # within A B: parameters equal to roundoff (max |diff| below 1e-5), the same val loss
  local d
  d=$("$compare" "$tmp/$1.safetensors" "$tmp/$2.safetensors" | cut -d' ' -f1)
  /usr/bin/env python3 -c "import sys; sys.exit(0 if float('$d') < 1e-5 else 1)" || fail "$2 differs from $1 by $d"
  [[ "$(val_loss "$1")" == "$(val_loss "$2")" ]] || fail "$2's val loss $(val_loss "$2") is not $1's $(val_loss "$1")"
}
fingerprint() { (cd "$1" && find . -type f | sort | xargs sha256sum); }

# 4 members, ZeRO-2: a checkpoint every 4 steps, each 4 shard files and an index, nothing else.
run g4 "${four[@]}" --shard=gradients --checkpoint_dir="$tmp/ck4" --checkpoint_every=4 \
  --checkpoint="$tmp/g4.safetensors" || fail "4 x ZeRO-2 checkpointing run: $(cat "$tmp/g4.out")"
[[ "$(ls "$(step "$tmp/ck4" 4)" | tr '\n' ' ')" == "index.json shard-0-of-4.safetensors shard-1-of-4.safetensors shard-2-of-4.safetensors shard-3-of-4.safetensors " ]] ||
  fail "sharded checkpoint files: $(ls "$(step "$tmp/ck4" 4)")"
ls -A "$tmp/ck4" | grep -vx '.lock' | grep -v '^step-' && fail "left-overs in the checkpoint folder: $(ls -A "$tmp/ck4")"
grep -q '"stage": *"gradients"' "$(step "$tmp/ck4" 4)/index.json" || fail "index stage"

# Same world size and stage: byte-equal to the run that did not stop.
run g4_resumed "${four[@]}" --shard=gradients --resume="$(step "$tmp/ck4" 4)" --checkpoint="$tmp/g4_resumed.safetensors" ||
  fail "4 x ZeRO-2 resume: $(cat "$tmp/g4_resumed.out")"
cmp -s "$tmp/g4.safetensors" "$tmp/g4_resumed.safetensors" || fail "same-shape sharded resume differs"
grep -q '"resumed_from_step":4' "$tmp/g4_resumed.out" || fail "resume summary: $(tail -n 1 "$tmp/g4_resumed.out")"

# f16 with loss scaling: the scaler's state is in the index; the same shape resumes byte-equal.
run f16 "${two[@]}" --precision=f16 --shard=optimizer --checkpoint_dir="$tmp/ckf" --checkpoint_every=4 \
  --checkpoint="$tmp/f16.safetensors" || fail "f16 ZeRO-1: $(cat "$tmp/f16.out")"
grep -q '"loss_scale": *"' "$(step "$tmp/ckf" 8)/index.json" || fail "no loss scale in the f16 index"
run f16_resumed "${two[@]}" --precision=f16 --shard=optimizer --resume="$(step "$tmp/ckf" 8)" \
  --checkpoint="$tmp/f16_resumed.safetensors" || fail "f16 resume: $(cat "$tmp/f16_resumed.out")"
cmp -s "$tmp/f16.safetensors" "$tmp/f16_resumed.safetensors" || fail "f16 sharded resume differs"

# Shrinking: 4 x ZeRO-2 at step 4 -> 2 unsharded (which writes the unsharded form at 8) -> 1 device.
run n2 "${two[@]}" --resume="$(step "$tmp/ck4" 4)" --checkpoint_dir="$tmp/ckn2" --checkpoint_every=4 \
  --checkpoint="$tmp/n2.safetensors" || fail "4 x ZeRO-2 -> 2 unsharded: $(cat "$tmp/n2.out")"
within g4 n2
[[ -f "$(step "$tmp/ckn2" 8)/model.safetensors" ]] || fail "an unsharded run writes the unsharded form"
run n1 "${one[@]}" --resume="$(step "$tmp/ckn2" 8)" --checkpoint="$tmp/n1.safetensors" ||
  fail "2 unsharded -> 1 device: $(cat "$tmp/n1.out")"
within g4 n1

# Growing: 1 device at step 4 -> 2 x ZeRO-1 (writing the sharded form at 8) -> 4 x ZeRO-2.
run s1 "${one[@]}" --checkpoint_dir="$tmp/cks1" --checkpoint_every=4 --checkpoint="$tmp/s1.safetensors" ||
  fail "1 device: $(cat "$tmp/s1.out")"
run o2 "${two[@]}" --shard=optimizer --resume="$(step "$tmp/cks1" 4)" --checkpoint_dir="$tmp/cko2" --checkpoint_every=4 \
  --checkpoint="$tmp/o2.safetensors" || fail "1 device -> 2 x ZeRO-1: $(cat "$tmp/o2.out")"
within s1 o2
[[ -f "$(step "$tmp/cko2" 8)/index.json" ]] || fail "no sharded checkpoint at step 8 of the ZeRO-1 run"
run g4b "${four[@]}" --shard=gradients --resume="$(step "$tmp/cko2" 8)" --checkpoint="$tmp/g4b.safetensors" ||
  fail "2 x ZeRO-1 -> 4 x ZeRO-2: $(cat "$tmp/g4b.out")"
within s1 g4b

# Across processes: 2 processes x 1 device write the very shard files one process with 2
# devices writes, and either resumes the other's checkpoint byte-equal.
run g2 "${two[@]}" --shard=gradients --checkpoint_dir="$tmp/ckg2" --checkpoint_every=4 --checkpoint="$tmp/g2.safetensors" ||
  fail "2 x ZeRO-2: $(cat "$tmp/g2.out")"
"$launch" --nproc=2 -- "$gpt" "${tiny[@]}" "${one[@]}" --shard=gradients --checkpoint_dir="$tmp/ckmp" --checkpoint_every=4 \
  >"$tmp/mp.out" 2>&1 || fail "2 processes x ZeRO-2: $(cat "$tmp/mp.out")"
for f in shard-0-of-2.safetensors shard-1-of-2.safetensors; do
  cmp -s "$(step "$tmp/ckg2" 8)/$f" "$(step "$tmp/ckmp" 8)/$f" || fail "$f differs between 1 and 2 processes"
done
run from_mp "${two[@]}" --shard=gradients --resume="$(step "$tmp/ckmp" 4)" --checkpoint="$tmp/from_mp.safetensors" ||
  fail "2 processes -> 1 process: $(cat "$tmp/from_mp.out")"
cmp -s "$tmp/g2.safetensors" "$tmp/from_mp.safetensors" || fail "resumed from 2 processes' checkpoint differs"
"$launch" --nproc=2 -- "$gpt" "${tiny[@]}" "${one[@]}" --shard=gradients --resume="$(step "$tmp/ckg2" 4)" \
  --checkpoint="$tmp/to_mp.safetensors" >"$tmp/to_mp.out" 2>&1 || fail "1 process -> 2 processes: $(cat "$tmp/to_mp.out")"
cmp -s "$tmp/g2.safetensors" "$tmp/to_mp.safetensors" || fail "2 processes resumed from 1 process's checkpoint differ"

# Consolidated: byte for byte the unsharded form's model.safetensors (clipping off: the stages'
# parameters are then bit-identical to unsharded ones).
run c_none "${two[@]}" --clip=0 --steps=4 --checkpoint_dir="$tmp/ckcn" --checkpoint_every=4 || fail "clip 0: $(cat "$tmp/c_none.out")"
run c_grad "${two[@]}" --clip=0 --steps=4 --shard=gradients --checkpoint_dir="$tmp/ckcg" --checkpoint_every=4 ||
  fail "clip 0, ZeRO-2: $(cat "$tmp/c_grad.out")"
"$consolidate" --in="$(step "$tmp/ckcg" 4)" --out="$tmp/consolidated.safetensors" >"$tmp/consolidate.out" 2>&1 ||
  fail "consolidate: $(cat "$tmp/consolidate.out")"
cmp -s "$(step "$tmp/ckcn" 4)/model.safetensors" "$tmp/consolidated.safetensors" ||
  fail "consolidated model differs from the unsharded checkpoint's"

# Bad checkpoints: exit 2 naming the problem, the folder untouched, nothing written.
expect_refusal() {  # expect_refusal DIR "message" args...
  local dir="$1" want="$2"; shift 2
  local before err status
  before=$(fingerprint "$dir")
  err=$("$gpt" "${tiny[@]}" "$@" --resume="$dir" --checkpoint_dir="$tmp/refused" 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 ]] || fail "--resume=$dir $* exited $status, not 2 ($err)"
  [[ "$err" == *"$want"* ]] || fail "--resume=$dir $*: stderr '$err' lacks '$want'"
  [[ "$(fingerprint "$dir")" == "$before" ]] || fail "--resume=$dir changed the checkpoint"
  [[ -z "$(ls -A "$tmp/refused" | grep -vx '.lock')" ]] || fail "--resume=$dir wrote $(ls -A "$tmp/refused")"
}
bad() { rm -rf "$tmp/$1" && cp -r "$(step "$tmp/ck4" 8)" "$tmp/$1" && echo "$tmp/$1"; }
d=$(bad missing) && rm "$d/shard-2-of-4.safetensors"
want="--resume=$d: $d/shard-2-of-4.safetensors is missing: the sharded checkpoint $d is incomplete (its index lists the file)"
expect_refusal "$d" "$want" "${four[@]}" --shard=gradients
expect_refusal "$d" "$want" "${one[@]}"
flip() {  # flip FILE OFFSET: one bit of the byte at OFFSET
  /usr/bin/env python3 -c "import sys; f = open(sys.argv[1], 'r+b'); f.seek(int(sys.argv[2])); b = f.read(1); f.seek(int(sys.argv[2])); f.write(bytes([b[0] ^ 1]))" "$1" "$2"
}
d=$(bad damaged) && flip "$d/shard-1-of-4.safetensors" $(($(stat -c %s "$d/shard-1-of-4.safetensors") - 5))
want="--resume=$d: $d/shard-1-of-4.safetensors was changed or damaged after it was written ("
expect_refusal "$d" "$want" "${four[@]}" --shard=gradients
expect_refusal "$d" "$want" "${two[@]}" --shard=optimizer
d=$(bad damaged_header) && printf '\x01' | dd of="$d/shard-3-of-4.safetensors" bs=1 seek=1000 conv=notrunc status=none
want="--resume=$d: $d/shard-3-of-4.safetensors was changed or damaged after it was written: "
expect_refusal "$d" "$want" "${four[@]}" --shard=gradients
d=$(bad uncovered) && /usr/bin/env python3 - "$d/index.json" <<'PY'
import json, sys
index = json.load(open(sys.argv[1]))
for name in [n for n in index["tensors"] if n.endswith("wte.weight")]:
    del index["tensors"][name]
    for f in index["files"]: del f["chunks"][name]
json.dump(index, open(sys.argv[1], "w"))
PY
expect_refusal "$d" "--resume: $d has no tensor for parameter wte.weight: its shards do not cover the model" "${two[@]}" --shard=gradients
d=$(bad edited) && sed -i 's/"step": *"8"/"step":"9"/' "$d/index.json"
expect_refusal "$d" "--resume=$d: $d/index.json: its metadata was changed or damaged after it was written" "${two[@]}"
"$launch" --nproc=2 -- "$gpt" "${tiny[@]}" "${one[@]}" --shard=gradients --resume="$tmp/damaged" >"$tmp/mp_bad.out" 2>&1
status=$?
[[ $status -eq 2 ]] || fail "2 processes from a damaged checkpoint exited $status, not 2: $(cat "$tmp/mp_bad.out")"
grep -q "$tmp/damaged/shard-1-of-4.safetensors was changed or damaged" "$tmp/mp_bad.out" || fail "2 processes: $(cat "$tmp/mp_bad.out")"

# --resume=latest passes over a step folder without an index (its writers were interrupted),
# and leaves it be.
cp -r "$(step "$tmp/ck4" 12)" "$(step "$tmp/ck4" 16)" && rm "$(step "$tmp/ck4" 16)/index.json"
run latest "${four[@]}" --shard=gradients --checkpoint_dir="$tmp/ck4" --resume=latest || fail "latest: $(cat "$tmp/latest.out")"
grep -q "skipping $(step "$tmp/ck4" 16): $(step "$tmp/ck4" 16) has neither training_state.safetensors nor index.json" \
  "$tmp/latest.out" || fail "no note on the incomplete folder: $(cat "$tmp/latest.out")"
grep -q '"resumed_from_step":12' "$tmp/latest.out" || fail "latest is not step 12: $(tail -n 1 "$tmp/latest.out")"
[[ -d "$(step "$tmp/ck4" 16)" ]] || fail "the incomplete folder was removed"

# Pruning keeps the newest --keep_checkpoints of the run's sharded checkpoints.
run pruned "${two[@]}" --shard=optimizer --steps=8 --checkpoint_dir="$tmp/ckp" --checkpoint_every=2 --keep_checkpoints=2 ||
  fail "pruning run: $(cat "$tmp/pruned.out")"
[[ "$(ls "$tmp/ckp" | tr '\n' ' ')" == "step-000000000006 step-000000000008 " ]] || fail "kept: $(ls -A "$tmp/ckp")"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all sharded_checkpoint_test checks passed"
