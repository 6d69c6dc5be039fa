#!/usr/bin/env bash
# Issue 19's target for examples/gpt: the short run of gpt_accuracy_test under --precision=bf16
# (and f16, with loss scaling) ends within 0.03 nats of f32's validation loss.
set -euo pipefail
gpt="$1"
run() { "$gpt" --steps=300 --layers=2 --width=64 --heads=4 --eval_every=300 "$@" | tail -n 1; }
loss() { echo "$1" | sed -n 's/.*"val_loss":\([0-9.]*\).*/\1/p'; }
reference=$(run --precision=f32)
echo "f32: $reference"
want=$(loss "$reference")
for precision in bf16 f16; do
  got=$(run --precision=$precision)
  echo "$precision: $got"
  l=$(loss "$got")
  awk -v l="$l" -v w="$want" 'BEGIN { d = l - w; if (d < 0) d = -d; exit !(l != "" && d <= 0.03) }' || {
    echo "FAIL: $precision validation loss $l is not within 0.03 of f32's $want"; exit 1; }
done
