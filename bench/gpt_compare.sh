#!/usr/bin/env bash
# examples/gpt next to its PyTorch peer (bench/gpt_torch.py, Debian's python3-torch, which this
# script installs; never a build or test dependency): the same model, data, split and
# hyper-parameters for the same number of steps on the same threads, one after the other.
#
#   bench/gpt_compare.sh [STEPS] [THREADS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps=${1:-200}
threads=${2:-2}
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  # OpenBLAS: the BLAS a user of Debian's torch would have (the reference BLAS is ~8x slower here).
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-torch libopenblas0-pthread >&2
fi
./bazelw build //examples:gpt >&2
grep -m1 'model name' /proc/cpuinfo
kiln=$(bazel-bin/examples/gpt --steps="$steps" --eval_every="$steps" --threads="$threads" | tail -n 1)
torch=$(OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 bench/gpt_torch.py --steps="$steps" --threads="$threads")
python3 - "$kiln" "$torch" "$steps" <<'PY'
import json, sys
k, t, steps = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3])
k_ms = 1000 * steps * 32 * 64 / k["tokens_per_sec"] / steps
print(f"{'':8} {'ms/step':>9} {'val loss':>9} {'bits/byte':>9}")
print(f"{'kiln':8} {k_ms:9.1f} {k['val_loss']:9.4f} {k['val_bits_per_byte']:9.4f}")
print(f"{'torch':8} {t['ms_per_step']:9.1f} {t['val_loss']:9.4f} {t['val_bits_per_byte']:9.4f}  (torch {t['torch']})")
print(f"kiln / torch step time: {k_ms / t['ms_per_step']:.2f}; val loss difference {k['val_loss'] - t['val_loss']:+.4f} nats")
PY
