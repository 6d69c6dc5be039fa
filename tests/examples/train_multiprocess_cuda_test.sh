#!/usr/bin/env bash
# --config=cuda: CUDA tensors across processes through one NCCL communicator. With two GPUs,
# two processes of one GPU each end with the checkpoint of one process driving both GPUs, bit
# for bit (NCCL sums two gradients as a + b either way). Without them, what can be checked is
# that each process takes its own GPU: local rank 1 asks for cuda:1, and a missing GPU is a
# clear error naming it, never a hang.
set -uo pipefail
train="$1"
launch="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
common=(--train_limit=512 --epochs=1 --batch_size=64 --collective_timeout=60)
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if (( gpus >= 2 )); then
  "$train" "${common[@]}" --devices=cuda:0,cuda:1 --checkpoint="$tmp/ref.safetensors" >"$tmp/ref.out" 2>&1 ||
    { echo "FAIL: in-process run: $(cat "$tmp/ref.out")"; exit 1; }
  "$launch" --nproc=2 -- "$train" "${common[@]}" --devices=cuda:0 --checkpoint="$tmp/mp.safetensors" \
    >"$tmp/mp.out" 2>&1 || { echo "FAIL: 2 x 1 run: $(cat "$tmp/mp.out")"; exit 1; }
  cmp -s "$tmp/ref.safetensors" "$tmp/mp.safetensors" || { echo "FAIL: checkpoints differ"; exit 1; }
  echo "2 x cuda:0 (one GPU each, NCCL) = cuda:0,cuda:1 in one process, bit for bit"
  exit 0
fi
# Fewer than two GPUs: the second process on this machine must be refused its GPU, by name.
# It is started alone with the variables the launcher would give it (under the launcher, the
# first process's own refusal may stop it before it says so).
if KILN_RANK=1 KILN_WORLD_SIZE=2 KILN_LOCAL_RANK=1 KILN_LOCAL_WORLD_SIZE=2 KILN_RENDEZVOUS="file://$tmp/store" \
    "$train" "${common[@]}" --devices=cuda:0 >"$tmp/rank1.out" 2>&1; then
  echo "FAIL: a second process trained on $gpus GPU(s): $(cat "$tmp/rank1.out")"
  exit 1
fi
want="the process with local rank 1 of 2 trains on cuda:1 in place of cuda:0 (each takes its own cuda devices)"
grep -qF "$want" "$tmp/rank1.out" || { echo "FAIL: expected '$want' in: $(cat "$tmp/rank1.out")"; exit 1; }
echo "fewer than 2 GPUs ($gpus): local rank 1 asked for cuda:1 and was refused clearly"
