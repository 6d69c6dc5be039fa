#!/usr/bin/env bash
# examples/gpt sharded (--shard=optimizer|gradients|parameters, ZeRO-1/2/3) as a user runs it: the same
# parameters as unsharded data parallelism, byte for byte (clipping off) or to roundoff
# (clipping on: its norm is summed in another order), in one process and across processes;
# checkpoints resume under another stage and world size; bad input exits 2 naming the problem.
set -uo pipefail
gpt="$1"
launch="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

expect_error() {
  local want="$1"; shift
  local err status
  err=$("$gpt" "$@" 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 ]] || fail "$* exited $status, not 2 ($err)"
  [[ "$err" == *"$want"* ]] || fail "$*: stderr '$err' lacks '$want'"
}

expect_error "--shard=zero: expected none, optimizer, gradients or parameters" --shard=zero

# Largest |difference| between the tensors of two safetensors files (same names), 0 when equal.
max_diff() {
  /usr/bin/env python3 - "$1" "$2" <<'PY'
import array, json, struct, sys
def load(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    return {k: array.array("f", raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
if a.keys() != b.keys(): sys.exit("different tensors")
print(max(abs(x - y) for k in a for x, y in zip(a[k], b[k])))
PY
}

# --width=20 --heads=2: sizes such as 20 and 60 do not divide by 3 members: padded chunks.
small=(--steps=12 --batch_size=6 --context=16 --layers=1 --heads=2 --width=20 --eval_every=12 --eval_batches=1 --threads=1)
two=(--devices=cpu:0,cpu:1)
"$gpt" "${small[@]}" "${two[@]}" --clip=0 --checkpoint="$tmp/none.safetensors" >"$tmp/none.out" 2>&1 ||
  fail "unsharded run: $(cat "$tmp/none.out")"
for stage in optimizer gradients parameters; do
  "$gpt" "${small[@]}" "${two[@]}" --clip=0 --shard=$stage --checkpoint="$tmp/$stage.safetensors" >"$tmp/$stage.out" 2>&1 ||
    fail "--shard=$stage: $(cat "$tmp/$stage.out")"
  tail -n 1 "$tmp/$stage.out" | grep -q "\"shard\":\"$stage\"}$" || fail "--shard=$stage summary: $(tail -n 1 "$tmp/$stage.out")"
  cmp -s "$tmp/none.safetensors" "$tmp/$stage.safetensors" || fail "--shard=$stage differs from unsharded"
done
# Three members, clipping on (the default): equal to roundoff.
three=(--devices=cpu:0,cpu:1,cpu:2)
"$gpt" "${small[@]}" "${three[@]}" --checkpoint="$tmp/none3.safetensors" >/dev/null 2>&1 || fail "unsharded x3"
"$gpt" "${small[@]}" "${three[@]}" --shard=gradients --checkpoint="$tmp/grad3.safetensors" >/dev/null 2>&1 ||
  fail "--shard=gradients x3"
d=$(max_diff "$tmp/none3.safetensors" "$tmp/grad3.safetensors")
/usr/bin/env python3 -c "import sys; sys.exit(0 if float('$d') < 1e-6 else 1)" || fail "clipped, 3 members: max |diff| $d"

# Across processes: 2 processes x 1 device sharded equals one process with 2 devices unsharded.
for stage in gradients parameters; do
  "$launch" --nproc=2 -- "$gpt" "${small[@]}" --devices=cpu:0 --clip=0 --shard=$stage \
    --checkpoint="$tmp/mp.safetensors" >"$tmp/mp.out" 2>&1 || fail "2 x 1 --shard=$stage: $(cat "$tmp/mp.out")"
  cmp -s "$tmp/none.safetensors" "$tmp/mp.safetensors" || fail "2 x 1 --shard=$stage differs from unsharded in one process"
done

# Checkpoints: a ZeRO-2 run on 2 devices checkpoints at step 6; resumed on 2 devices ZeRO-2
# it ends byte-equal to the uninterrupted run; resumed unsharded on one device, or ZeRO-1 on
# three, to roundoff (another world size sums the batch in other shards).
tiny=(--steps=12 --batch_size=6 --context=16 --layers=1 --heads=2 --width=20 --eval_every=6 --eval_batches=1 --threads=1)
"$gpt" "${tiny[@]}" "${two[@]}" --shard=gradients --checkpoint_dir="$tmp/ck" --checkpoint_every=6 \
  --checkpoint="$tmp/full.safetensors" >"$tmp/ck.out" 2>&1 || fail "checkpointing sharded run: $(cat "$tmp/ck.out")"
"$gpt" "${tiny[@]}" "${two[@]}" --shard=gradients --resume="$tmp/ck/step-000000000006" \
  --checkpoint="$tmp/resumed.safetensors" >"$tmp/resumed.out" 2>&1 || fail "sharded resume: $(cat "$tmp/resumed.out")"
cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors" || fail "sharded resume differs from the uninterrupted run"
"$gpt" "${tiny[@]}" "${two[@]}" --checkpoint="$tmp/ddp.safetensors" >/dev/null 2>&1 || fail "unsharded reference run"
for resume in "--devices=cpu:0" "${three[0]} --shard=optimizer"; do
  # shellcheck disable=SC2086
  "$gpt" "${tiny[@]}" $resume --resume="$tmp/ck/step-000000000006" --checkpoint="$tmp/other.safetensors" \
    >"$tmp/other.out" 2>&1 || fail "resumed with $resume: $(cat "$tmp/other.out")"
  d=$(max_diff "$tmp/ddp.safetensors" "$tmp/other.safetensors")
  /usr/bin/env python3 -c "import sys; sys.exit(0 if float('$d') < 1e-5 else 1)" || fail "resumed with $resume: max |diff| $d"
done

# ZeRO-3 checkpoints the same way: resumed under ZeRO-3 it is byte-equal, resumed unsharded on
# one device equal to roundoff.
"$gpt" "${tiny[@]}" "${two[@]}" --shard=parameters --checkpoint_dir="$tmp/ck3" --checkpoint_every=6 \
  --checkpoint="$tmp/full3.safetensors" >"$tmp/ck3.out" 2>&1 || fail "checkpointing ZeRO-3 run: $(cat "$tmp/ck3.out")"
"$gpt" "${tiny[@]}" "${two[@]}" --shard=parameters --resume="$tmp/ck3/step-000000000006" \
  --checkpoint="$tmp/resumed3.safetensors" >/dev/null 2>&1 || fail "ZeRO-3 resume"
cmp -s "$tmp/full3.safetensors" "$tmp/resumed3.safetensors" || fail "ZeRO-3 resume differs from the uninterrupted run"
cmp -s "$tmp/full.safetensors" "$tmp/full3.safetensors" || fail "the ZeRO-3 run differs from the ZeRO-2 run"
"$gpt" "${tiny[@]}" --devices=cpu:0 --resume="$tmp/ck3/step-000000000006" --checkpoint="$tmp/other3.safetensors" \
  >/dev/null 2>&1 || fail "ZeRO-3 checkpoint resumed on one device"
d=$(max_diff "$tmp/ddp.safetensors" "$tmp/other3.safetensors")
/usr/bin/env python3 -c "import sys; sys.exit(0 if float('$d') < 1e-5 else 1)" || fail "ZeRO-3 -> 1 device: max |diff| $d"

# Ranks launched with different stages: every rank exits 2 naming the setting.
out=$("$launch" --nproc=2 -- bash -c 'exec "$0" "$@" --shard=$([ "$KILN_RANK" = 0 ] && echo none || echo gradients)' \
  "$gpt" "${small[@]}" --devices=cpu:0 2>&1); status=$?
[[ $status -ne 0 ]] || fail "ranks with different --shard ran"
[[ "$out" == *"--shard"* ]] || fail "disagreeing ranks: the message does not name --shard: $out"

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all shard_test checks passed"
