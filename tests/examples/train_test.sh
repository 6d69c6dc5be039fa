#!/usr/bin/env bash
# examples/train as a user runs it: bad input exits 2 with a message, a short run ends in one
# JSON line, the same seed gives the same result, and a checkpoint is written.
set -uo pipefail
train="$1"
backends="${*:2}"  # the backends this build has, e.g. "cpu vulkan"
backends="${backends:-cpu}"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0

fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# expect_error "message fragment" args...: exit status 2 and the fragment on stderr.
expect_error() {
  local want="$1"; shift
  local err status
  err=$("$train" "$@" 2>&1 >/dev/null); status=$?
  [[ $status -eq 2 ]] || fail "$* exited $status, not 2 ($err)"
  [[ "$err" == *"$want"* ]] || fail "$*: stderr '$err' lacks '$want'"
}

expect_error "unknown flag --modle" --modle=mlp
expect_error "--epochs=three" --epochs=three
expect_error "--model=resnet: expected mlp or cnn" --model=resnet
expect_error "--optimizer=adam: expected sgd or adamw" --optimizer=adam
expect_error "--batch_size must be >= 1" --batch_size=0
expect_error "gradient sync: device 1 is cpu:0, the same device as device 0; each device may appear once" --devices=cpu:0,cpu:0
if [[ "$backends" == *vulkan* ]]; then
  expect_error "gradient sync: device 1 is vulkan:0 (vulkan) but device 0 is cpu:0 (cpu); a group's devices share one backend" --devices=cpu:0,vulkan:0
  expect_error "vulkan:5 does not exist" --devices=vulkan:5
else
  expect_error "this build has no vulkan backend; rebuild with --config=vulkan" --devices=cpu:0,vulkan:0
fi
expect_error "device 1 is autodiff(cpu:1) but device 0 is cpu:0; a group's devices are all autodiff or none" "--devices=cpu:0,autodiff(cpu:1)"
# In a CUDA build cuda:0 names a real device where there is a GPU (tests/backends/cuda).
[[ "$backends" == *cuda* ]] || expect_error "rebuild with --config=cuda" --devices=cuda:0
expect_error "unknown backend 'gpu'" --devices=gpu:0
expect_error "is not of the form backend:index" --devices=cpu
expect_error "is smaller than the 2 devices" --devices=cpu:0,cpu:1 --batch_size=1
expect_error "cannot open $tmp/nodata/train-images-idx3-ubyte.gz" --data_dir="$tmp/nodata"
mkdir -p "$tmp/corrupt"
printf 'not an idx file' | gzip > "$tmp/corrupt/train-images-idx3-ubyte.gz"
cp /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz "$tmp/corrupt/"
expect_error "is not a valid IDX file" --data_dir="$tmp/corrupt"

# Values that once became a default in silence, trained to NaN, overflowed or were misread.
expect_error "--lr=nan: expected a learning rate in [0, 1000]" --lr=nan
expect_error "--lr=inf: expected a learning rate in [0, 1000]" --lr=inf
expect_error "--weight_decay=nan: expected a weight decay in [0, 1000]" --weight_decay=nan
expect_error "--collective_timeout must be > 0 seconds and at most 604800" --collective_timeout=1e300
expect_error "--flagfile is not supported" --flagfile="$tmp/flags"
expect_error "--fromenv is not supported" --fromenv=lr
expect_error "--model is not a true/false flag" --nomodel
expect_error "--batch_size needs a value" --batch_size
expect_error "64: unexpected argument" --epochs=1 64
expect_error "index '2147483647' is out of range (0..1023)" --devices=cpu:2147483647
expect_error "1024 devices x 1024 threads each is 1048576 threads; at most 4096 in all" --devices=cpu:1023 --threads=1024
expect_error "--train_limit=1 leaves 1 training image(s) for 2 devices" --train_limit=1 --devices=cpu:0,cpu:1
# An unwritable --checkpoint is found before any training, not after the first epoch.
start=$(date +%s)
expect_error "--checkpoint=$tmp/no/such/dir/model.safetensors" --checkpoint="$tmp/no/such/dir/model.safetensors"
(($(date +%s) - start < 5)) || fail "an unwritable --checkpoint took $(($(date +%s) - start)) s to report"
# The space form is a value, as in Abseil.
out=$("$train" --train_limit 640 --epochs 1 --threads 1 --nocosine 2>&1) || fail "space-form flags exited $?: $out"
# A run that diverges stops with a message (exit 1) instead of printing a NaN that is no JSON.
err=$("$train" --train_limit=640 --epochs=1 --threads=1 --lr=1000 2>&1 >/dev/null); status=$?
[[ $status -eq 1 && "$err" == *"the run diverged"* ]] || fail "--lr=1000 exited $status: $err"

run() { "$train" --train_limit=3000 --epochs=1 --threads=1 "$@" 2>&1; }
out1=$(run --checkpoint="$tmp/model.safetensors") || fail "short run exited $?: $out1"
last=$(echo "$out1" | tail -n 1)
for key in test_accuracy train_loss epochs steps samples_per_sec devices; do
  [[ "$last" == *"\"$key\":"* ]] || fail "last line lacks $key: $last"
done
[[ "$last" == '{'*'"devices":["cpu:0"],"precision":"f32"}' ]] || fail "last line is not the JSON summary: $last"
[[ -s "$tmp/model.safetensors" ]] || fail "no checkpoint written"
out2=$(run)
strip() { echo "$1" | tail -n 1 | sed 's/"samples_per_sec":[0-9.]*,//; s/"peak_bytes":\[[0-9,]*\],"peak_rss_bytes":[0-9]*,//'; }
[[ "$(strip "$out1")" == "$(strip "$out2")" ]] || fail "same seed, different results: $(strip "$out1") vs $(strip "$out2")"
# --recompute (runs of 3 layers recomputed in backward) trains to the same parameters.
out_rc=$(run --recompute --checkpoint="$tmp/recompute.safetensors") || fail "--recompute run exited $?: $out_rc"
cmp -s "$tmp/model.safetensors" "$tmp/recompute.safetensors" || fail "--recompute changed the trained parameters"
[[ "$(strip "$out_rc")" == "$(strip "$out1" | sed 's/}$/,"recompute":true}/')" ]] ||
  fail "--recompute summary: $(strip "$out_rc") vs $(strip "$out1")"
out3=$(run --seed=2)
[[ "$(strip "$out1")" != "$(strip "$out3")" ]] || fail "another seed gave the very same result"
# Data-parallel over two devices trains too, and says so.
out4=$(run --devices=cpu:0,cpu:1) || fail "two-device run exited $?: $out4"
[[ "$(echo "$out4" | tail -n 1)" == *'"devices":["cpu:0","cpu:1"],"precision":"f32"}' ]] || fail "two-device summary: $(echo "$out4" | tail -n 1)"
# ZeRO-3 (each layer of the MLP a shard unit, gathered around its forward and backward, the
# parameters gathered for evaluation and the checkpoint) trains what DDP trains, to the bit.
run --devices=cpu:0,cpu:1 --checkpoint="$tmp/ddp.safetensors" >/dev/null || fail "two-device run with a checkpoint"
out5=$(run --devices=cpu:0,cpu:1 --shard=parameters --checkpoint="$tmp/zero3.safetensors") ||
  fail "--shard=parameters run exited $?: $out5"
cmp -s "$tmp/ddp.safetensors" "$tmp/zero3.safetensors" || fail "--shard=parameters trained other parameters"
[[ "$(strip "$out5")" == "$(strip "$out4" | sed 's/}$/,"shard":"parameters"}/')" ]] ||
  fail "--shard=parameters summary: $(strip "$out5") vs $(strip "$out4")"

# Memory: the progress line shows each device's current/peak tensor bytes and the resident set;
# the JSON line has a peak per local device, each at least the parameters' bytes (the sum of the
# checkpoint's tensors), and the resident set's peak, at least a CPU device's peak (rss=1).
memory_fields() {  # checkpoint, output, local devices, rss
  /usr/bin/env python3 - "$@" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
params = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in json.loads(raw[8:8 + n]).items() if k != "__metadata__")
last = sys.argv[2].splitlines()[-1]
line = json.loads(last[last.index("{"):])
peaks, rss = line["peak_bytes"], line["peak_rss_bytes"]
if len(peaks) != int(sys.argv[3]): sys.exit(f"{len(peaks)} peaks for {sys.argv[3]} devices: {last}")
if min(peaks) < params: sys.exit(f"peak_bytes {peaks} below the parameters' {params} bytes")
if sys.argv[4] == "1" and rss < max(peaks): sys.exit(f"peak_rss_bytes {rss} below a device's peak {max(peaks)}")
PY
}
memory_fields "$tmp/model.safetensors" "$out1" 1 1 || fail "memory fields of the one-device run"
memory_fields "$tmp/model.safetensors" "$out4" 2 1 || fail "memory fields of the two-device run"
echo "$out4" | grep -qE '^epoch 1/1 step [0-9]+/[0-9]+ loss .* samples/s mem [0-9.]+/[0-9.]+, [0-9.]+/[0-9.]+ [KMG]iB, rss [0-9.]+ [KMG]iB$' ||
  fail "no memory in the progress line: $out4"

# On Vulkan (lavapipe in CI: two virtual devices on the CPU), data-parallel training over two
# devices gives the CPU's result: same loss and accuracy to the printed digits.
if [[ "$backends" == *vulkan* ]]; then
  small() { "$train" --train_limit=640 --batch_size=64 --epochs=1 --threads=1 "$@" 2>&1; }
  cpu=$(small --devices=cpu:0,cpu:1) || fail "cpu run exited $?: $cpu"
  vk=$(KILN_VULKAN_VIRTUAL_DEVICES=2 small --devices=vulkan:0,vulkan:1) || fail "vulkan run exited $?: $vk"
  last_vk=$(echo "$vk" | tail -n 1)
  [[ "$last_vk" == *'"devices":["vulkan:0","vulkan:1"],"precision":"f32"}' ]] || fail "vulkan summary: $last_vk"
  memory_fields "$tmp/model.safetensors" "$vk" 2 0 || fail "memory fields of the vulkan run"
  [[ "$(strip "$cpu" | sed 's/"devices".*//')" == "$(strip "$vk" | sed 's/"devices".*//')" ]] ||
    fail "vulkan and cpu disagree: $(strip "$vk") vs $(strip "$cpu")"
fi

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all train_test checks passed"
