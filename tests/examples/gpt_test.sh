#!/usr/bin/env bash
# examples/gpt as a user runs it: bad input exits 2 with a message, a short run on the real
# corpus ends in one JSON line, the same seed gives the same result, and sampling prints text.
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

expect_error "--heads=3: must divide --width=128" --heads=3
expect_error "--lr=nan: expected a number in (0, 10]" --lr=nan
expect_error "--context=1: expected 2..16384" --context=1
expect_error "--batch_size needs a value" --batch_size
expect_error "cannot open the corpus folder $tmp/none" --data_dir="$tmp/none"
mkdir -p "$tmp/empty"
expect_error "$tmp/empty holds no plain text file" --data_dir="$tmp/empty"
expect_error "is smaller than the 2 devices" --batch_size=1 --devices=cpu:0,cpu:1

# Memory: what cannot fit is refused (exit 2) before anything big is allocated, naming the
# estimate, its biggest part and what is available; under ulimit -v (prlimit --as), naming that.
# Sanitizers reserve terabytes of address space, so no --as limit under them; without one a
# regression here must not take the machine's memory, hence the limit around the first run too.
sanitized=0
grep -qaE 'libasan|libtsan' "$gpt" && sanitized=1
capped() { if ((sanitized)); then "$@"; else prlimit --as=$((16 << 30)) "$@"; fi; }
err=$(capped "$gpt" --width=4096 --layers=48 2>&1 >/dev/null); status=$?
[[ $status -eq 2 && "$err" =~ ^gpt:\ this\ configuration\ needs\ about\ [0-9]{3}\.[0-9]\ GiB\ \(parameters,\ gradients\ and\ AdamW\ moments ]] ||
  fail "a ~320 GiB configuration: exit $status, $err"
[[ "$err" == *" is available (the least of MemAvailable "* ]] || fail "the memory available is not named: $err"
if ((!sanitized)); then
  err=$(prlimit --as=$((4 << 30)) "$gpt" --width=1024 --layers=16 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 && "$err" == *"; ulimit -v (RLIMIT_AS) 4.0 GiB with "*" in use"* ]] ||
    fail "a ~7 GiB configuration under prlimit --as=4GiB: exit $status, $err"
fi

small=(--steps=3 --batch_size=4 --context=16 --layers=1 --heads=2 --width=16 --eval_batches=1 --threads=1)
out1=$("$gpt" "${small[@]}" --sample=20 --prompt="Q: " 2>&1) || fail "short run exited $?: $out1"
last=$(echo "$out1" | tail -n 1)
[[ "$last" == '{"val_loss":'*'"val_bits_per_byte":'*'"tokens_per_sec":'*'"steps":3,"devices":["cpu:0"],"precision":"f32"}' ]] ||
  fail "last line is not the JSON summary: $last"
echo "$out1" | grep -q '^Q: ' || fail "no sample after the prompt: $out1"
out2=$("$gpt" "${small[@]}" 2>&1)
strip() { echo "$1" | tail -n 1 | sed 's/"tokens_per_sec":[0-9.]*,//; s/"peak_bytes":\[[0-9,]*\],"peak_rss_bytes":[0-9]*,//'; }
[[ "$(strip "$out1")" == "$(strip "$out2")" ]] || fail "same seed, different results: $(strip "$out1") vs $(strip "$out2")"
out3=$("$gpt" "${small[@]}" --devices=cpu:0,cpu:1 2>&1) || fail "two-device run exited $?: $out3"
[[ "$(echo "$out3" | tail -n 1)" == *'"devices":["cpu:0","cpu:1"],"precision":"f32"}' ]] || fail "two-device summary: $(echo "$out3" | tail -n 1)"

# Across processes exactly like examples/train: 2 processes x 1 device is one process with
# cpu:0,cpu:1 (a sum of two gradients either way), so the checkpoints are equal byte for byte.
"$gpt" "${small[@]}" --devices=cpu:0,cpu:1 --checkpoint="$tmp/in.safetensors" >"$tmp/in.out" 2>&1 ||
  fail "in-process checkpointed run: $(cat "$tmp/in.out")"
"$launch" --nproc=2 -- "$gpt" "${small[@]}" --devices=cpu:0 --checkpoint="$tmp/mp.safetensors" >"$tmp/mp.out" 2>&1 ||
  fail "2 x 1 run: $(cat "$tmp/mp.out")"
tail -n 1 "$tmp/mp.out" | grep -q '^\[rank 0\] {"val_loss":.*"devices":\["cpu:0"\],"processes":2,"precision":"f32"}$' ||
  fail "2 x 1 summary: $(tail -n 1 "$tmp/mp.out")"
cmp -s "$tmp/in.safetensors" "$tmp/mp.safetensors" || fail "2 x 1 checkpoint differs from cpu:0,cpu:1 in one process"

# Memory: the progress line shows each device's current/peak tensor bytes and the resident set;
# the JSON line has a peak per local device, each at least the parameters' bytes (the sum of the
# checkpoint's tensors), and the resident set's peak, at least a CPU device's peak.
memory_fields() {  # checkpoint, output, local devices
  /usr/bin/env python3 - "$@" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
params = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__")
last = open(sys.argv[2]).read().splitlines()[-1]
line = json.loads(last[last.index("{"):])
peaks, rss = line["peak_bytes"], line["peak_rss_bytes"]
if len(peaks) != int(sys.argv[3]): sys.exit(f"{len(peaks)} peaks for {sys.argv[3]} devices: {last}")
if min(peaks) < params: sys.exit(f"peak_bytes {peaks} below the parameters' {params} bytes")
if rss < max(peaks): sys.exit(f"peak_rss_bytes {rss} below a device's peak {max(peaks)}")
PY
}
memory_fields "$tmp/in.safetensors" "$tmp/in.out" 2 || fail "memory fields of the two-device run"
memory_fields "$tmp/mp.safetensors" "$tmp/mp.out" 1 || fail "memory fields of the 2 x 1 run"
grep -qE '^epoch 1/1 step 3/3 loss .* tokens/s mem [0-9.]+/[0-9.]+, [0-9.]+/[0-9.]+ [KMG]iB, rss [0-9.]+ [KMG]iB$' "$tmp/in.out" ||
  fail "no memory in the progress line: $(cat "$tmp/in.out")"

# Resumed from a training checkpoint (dropout on: its random streams come back too) it ends
# byte for byte as the uninterrupted run; without dropout, resumed on two devices, within f32
# summation order.
tiny=(--steps=60 --layers=1 --width=32 --heads=2 --context=16 --batch_size=8 --eval_every=30 --eval_batches=2 --threads=1)
"$gpt" "${tiny[@]}" --dropout=0.1 --checkpoint="$tmp/full.safetensors" >"$tmp/full.out" 2>&1 || fail "tiny run: $(cat "$tmp/full.out")"
"$gpt" "${tiny[@]}" --dropout=0.1 --checkpoint_dir="$tmp/ck" --checkpoint_every=20 --keep_checkpoints=10 >"$tmp/ck.out" 2>&1 ||
  fail "checkpointing run: $(cat "$tmp/ck.out")"
grep -q '"checkpoints":4,' "$tmp/ck.out" || fail "checkpoints at 20, 30, 40, 60 expected: $(tail -n 1 "$tmp/ck.out")"
"$gpt" "${tiny[@]}" --dropout=0.1 --resume="$tmp/ck/step-000000000040" --checkpoint="$tmp/resumed.safetensors" \
  >"$tmp/resumed.out" 2>&1 || fail "resumed run: $(cat "$tmp/resumed.out")"
grep -q '"resumed_from_step":40' "$tmp/resumed.out" || fail "resume summary: $(tail -n 1 "$tmp/resumed.out")"
cmp -s "$tmp/full.safetensors" "$tmp/resumed.safetensors" || fail "resumed gpt differs from the uninterrupted run"
# --recompute (activation checkpointing) changes no number, with dropout on: the same parameters
# byte for byte, also resumed from the checkpoint of a run without it, and the summary says so.
"$gpt" "${tiny[@]}" --dropout=0.1 --recompute --checkpoint="$tmp/recompute.safetensors" >"$tmp/recompute.out" 2>&1 ||
  fail "--recompute run: $(cat "$tmp/recompute.out")"
cmp -s "$tmp/full.safetensors" "$tmp/recompute.safetensors" || fail "--recompute changed the trained parameters"
[[ "$(tail -n 1 "$tmp/recompute.out")" == *'"precision":"f32","recompute":true}' ]] ||
  fail "--recompute summary: $(tail -n 1 "$tmp/recompute.out")"
"$gpt" "${tiny[@]}" --dropout=0.1 --recompute --resume="$tmp/ck/step-000000000040" \
  --checkpoint="$tmp/resumed_recompute.safetensors" >"$tmp/resumed_recompute.out" 2>&1 ||
  fail "--recompute resumed run: $(cat "$tmp/resumed_recompute.out")"
cmp -s "$tmp/full.safetensors" "$tmp/resumed_recompute.safetensors" || fail "--recompute resumed differs"
expect_error "was written by a run with --dropout=0.10000000000000001; this run has --dropout=0" \
  "${tiny[@]}" --resume="$tmp/ck/step-000000000040"
"$gpt" "${tiny[@]}" --checkpoint="$tmp/plain.safetensors" >/dev/null 2>&1 || fail "tiny run without dropout"
"$gpt" "${tiny[@]}" --checkpoint_dir="$tmp/ck0" --checkpoint_every=20 >/dev/null 2>&1 || fail "checkpointing without dropout"
"$gpt" "${tiny[@]}" --devices=cpu:0,cpu:1 --resume="$tmp/ck0/step-000000000040" --checkpoint="$tmp/two.safetensors" \
  >"$tmp/two.out" 2>&1 || fail "resumed on two devices: $(cat "$tmp/two.out")"
/usr/bin/env python3 - "$tmp/plain.safetensors" "$tmp/two.safetensors" <<'PY' || fail "resumed on two devices differs"
import array, json, struct, sys
def load(p):
    raw = open(p, "rb").read(); n = struct.unpack("<Q", raw[:8])[0]; h = json.loads(raw[8:8 + n])
    return {k: array.array("f", raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]]) for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
worst = max(abs(x - y) for k in a for x, y in zip(a[k], b[k]))
sys.exit(0 if a.keys() == b.keys() and worst < 1e-5 else f"max |diff| {worst}")
PY

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all gpt_test checks passed"
