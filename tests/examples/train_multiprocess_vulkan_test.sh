#!/usr/bin/env bash
# --config=vulkan: Vulkan tensors cross processes staged through host memory (Gloo). Two
# processes of one Vulkan device end with the checkpoint of one process with two virtual
# Vulkan devices, bit for bit. Skips when the machine has no Vulkan device (fails instead
# where the run requires Vulkan, KILN_REQUIRE_ALL_BACKENDS=1 or vulkan in
# KILN_REQUIRE_BACKENDS, as the other Vulkan tests).
set -uo pipefail
train="$1"
launch="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--train_limit=512 --epochs=1 --batch_size=64)
if ! out=$(KILN_VULKAN_VIRTUAL_DEVICES=2 "$train" "${common[@]}" --devices=vulkan:0,vulkan:1 \
    --checkpoint="$tmp/ref.safetensors" 2>&1); then
  required=0
  [[ "${KILN_REQUIRE_ALL_BACKENDS:-0}" == 1 || ",${KILN_REQUIRE_BACKENDS:-}," == *",vulkan,"* ]] && required=1
  if ((!required)) && [[ "$out" == *"no Vulkan device"* || "$out" == *"does not exist"* ]]; then
    echo "SKIP: no Vulkan device: $out"
    exit 0
  fi
  echo "FAIL: in-process run: $out"
  exit 1
fi
"$launch" --nproc=2 -- "$train" "${common[@]}" --devices=vulkan:0 --checkpoint="$tmp/mp.safetensors" >"$tmp/mp.out" 2>&1 ||
  { echo "FAIL: 2 x 1 run: $(cat "$tmp/mp.out")"; exit 1; }
cmp -s "$tmp/ref.safetensors" "$tmp/mp.safetensors" || { echo "FAIL: checkpoints differ"; exit 1; }
echo "2 x vulkan:0 over Gloo = vulkan:0,vulkan:1 in one process, bit for bit"
