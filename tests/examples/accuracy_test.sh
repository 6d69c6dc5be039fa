#!/usr/bin/env bash
# The main job's targets: examples/train with its defaults reaches the test accuracy.
set -euo pipefail
train="$1"; model="$2"; target="$3"; shift 3  # then any further flags
last=$("$train" --model="$model" "$@" | tail -n 1)
echo "$last"
accuracy=$(echo "$last" | sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p')
awk -v a="$accuracy" -v t="$target" 'BEGIN { exit !(a >= t) }' || {
  echo "FAIL: $model test accuracy $accuracy < $target"; exit 1; }
