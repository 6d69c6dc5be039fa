#!/usr/bin/env bash
# examples/train as a user runs it: bad input exits 2 with a message, a short run ends in one
# JSON line, the same seed gives the same result, and a checkpoint is written.
set -uo pipefail
train="$1"
backends="${2:-cpu}"  # the backends this build has, e.g. "cpu,vulkan"
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
expect_error "rebuild with --config=cuda" --devices=cuda:0
expect_error "unknown backend 'gpu'" --devices=gpu:0
expect_error "is not of the form backend:index" --devices=cpu
expect_error "is smaller than the 2 devices" --devices=cpu:0,cpu:1 --batch_size=1
expect_error "cannot open $tmp/nodata/train-images-idx3-ubyte.gz" --data_dir="$tmp/nodata"
mkdir -p "$tmp/corrupt"
printf 'not an idx file' | gzip > "$tmp/corrupt/train-images-idx3-ubyte.gz"
cp /usr/share/datasets/fashion-mnist/train-labels-idx1-ubyte.gz "$tmp/corrupt/"
expect_error "is not a valid IDX file" --data_dir="$tmp/corrupt"

run() { "$train" --train_limit=3000 --epochs=1 --threads=1 "$@" 2>&1; }
out1=$(run --checkpoint="$tmp/model.safetensors") || fail "short run exited $?: $out1"
last=$(echo "$out1" | tail -n 1)
for key in test_accuracy train_loss epochs steps samples_per_sec devices; do
  [[ "$last" == *"\"$key\":"* ]] || fail "last line lacks $key: $last"
done
[[ "$last" == '{'*'"devices":["cpu:0"]}' ]] || fail "last line is not the JSON summary: $last"
[[ -s "$tmp/model.safetensors" ]] || fail "no checkpoint written"
out2=$(run)
strip() { echo "$1" | tail -n 1 | sed 's/"samples_per_sec":[0-9.]*,//'; }
[[ "$(strip "$out1")" == "$(strip "$out2")" ]] || fail "same seed, different results: $(strip "$out1") vs $(strip "$out2")"
out3=$(run --seed=2)
[[ "$(strip "$out1")" != "$(strip "$out3")" ]] || fail "another seed gave the very same result"
# Data-parallel over two devices trains too, and says so.
out4=$(run --devices=cpu:0,cpu:1) || fail "two-device run exited $?: $out4"
[[ "$(echo "$out4" | tail -n 1)" == *'"devices":["cpu:0","cpu:1"]}' ]] || fail "two-device summary: $(echo "$out4" | tail -n 1)"

# On Vulkan (lavapipe in CI: two virtual devices on the CPU), data-parallel training over two
# devices gives the CPU's result: same loss and accuracy to the printed digits.
if [[ "$backends" == *vulkan* ]]; then
  small() { "$train" --train_limit=640 --batch_size=64 --epochs=1 --threads=1 "$@" 2>&1; }
  cpu=$(small --devices=cpu:0,cpu:1) || fail "cpu run exited $?: $cpu"
  vk=$(KILN_VULKAN_VIRTUAL_DEVICES=2 small --devices=vulkan:0,vulkan:1) || fail "vulkan run exited $?: $vk"
  last_vk=$(echo "$vk" | tail -n 1)
  [[ "$last_vk" == *'"devices":["vulkan:0","vulkan:1"]}' ]] || fail "vulkan summary: $last_vk"
  [[ "$(strip "$cpu" | sed 's/"devices".*//')" == "$(strip "$vk" | sed 's/"devices".*//')" ]] ||
    fail "vulkan and cpu disagree: $(strip "$vk") vs $(strip "$cpu")"
fi

if ((failures)); then echo "$failures failed"; exit 1; fi
echo "all train_test checks passed"
