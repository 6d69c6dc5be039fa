#!/usr/bin/env bash
# A GPT that does not fit a per-process memory cap under DDP trains under the same cap with
# ZeRO-3 over 4 processes, to the same validation loss as an uncapped DDP run. The cap is an
# address-space limit (prlimit --as, inherited by every rank), the strictest a user can set.
#
#   ./bazelw build //examples:gpt //tools:launch && bench/zero3_memory_cap.sh [cap MiB, default 700]
#
# Prints each run's exit status, validation loss and peak resident set, then one JSON line.
set -uo pipefail
cap_mib="${1:-700}"
gpt=bazel-bin/examples/gpt
launch=bazel-bin/tools/launch
model=(--layers=8 --width=512 --heads=8 --context=64 --batch_size=8 --steps=6 --eval_every=6 --eval_batches=1
  --threads=1 --devices=cpu:0)
tmp=$(mktemp -d)
run() {  # name, cap (0: none), shard
  local cmd=("$launch" --nproc=4 -- "$gpt" "${model[@]}" --shard="$3")
  if (($2 > 0)); then cmd=(prlimit --as=$(($2 * 1024 * 1024)) -- "${cmd[@]}"); fi
  "${cmd[@]}" >"$tmp/$1.out" 2>&1
  local status=$?
  local json
  json=$(grep -o '^\[rank 0\] {.*}$' "$tmp/$1.out" | cut -c10-)
  local loss rss
  loss=$(echo "$json" | grep -o '"val_loss":[0-9.]*' | cut -d: -f2)
  rss=$(echo "$json" | grep -o '"peak_rss_bytes":[0-9]*' | cut -d: -f2)
  printf '%-22s exit %d  val_loss %-8s peak RSS %s MiB\n' "$1" "$status" "${loss:--}" "$((${rss:-0} / 1048576))" >&2
  ((status == 0)) || grep -m1 -E 'needs about|out of memory' "$tmp/$1.out" | cut -c1-240 >&2
  echo "\"$1\":{\"exit\":$status,\"val_loss\":${loss:-null},\"peak_rss_bytes\":${rss:-null}}"
}
echo "GPT 25.4M parameters, 4 processes x 1 device, cap ${cap_mib} MiB of address space per process" >&2
a=$(run ddp_uncapped 0 none)
b=$(run ddp_capped "$cap_mib" none)
c=$(run zero3_capped "$cap_mib" parameters)
echo "{\"cap_mib\":$cap_mib,$a,$b,$c}"
rm -rf "$tmp"
