#!/usr/bin/env bash
# examples/gpt next to its PyTorch peer (bench/gpt_torch.py, Debian's python3-torch, which this
# script installs; never a build or test dependency): the same model, init, data, split and
# hyper-parameters for the same number of steps on the same threads, one after the other, for
# each seed; then the means.
#
#   bench/gpt_compare.sh [STEPS] [THREADS] [SEEDS]     e.g. bench/gpt_compare.sh 1200 2 3
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
steps=${1:-200}
threads=${2:-2}
seeds=${3:-1}
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  # OpenBLAS: the BLAS a user of Debian's torch would have (the reference BLAS is ~8x slower here).
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends python3-torch libopenblas0-pthread >&2
fi
./bazelw build //examples:gpt >&2
grep -m1 'model name' /proc/cpuinfo
runs=()
for seed in $(seq 1 "$seeds"); do
  kiln=$(bazel-bin/examples/gpt --steps="$steps" --eval_every="$steps" --threads="$threads" --seed="$seed" | tail -n 1)
  torch=$(OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads /usr/bin/python3 bench/gpt_torch.py \
    --steps="$steps" --threads="$threads" --seed="$seed")
  runs+=("$kiln" "$torch")
done
python3 - "$steps" "${runs[@]}" <<'PY'
import json, statistics, sys
steps, runs = int(sys.argv[1]), [json.loads(r) for r in sys.argv[2:]]
rows = []
print(f"{'seed':>4} {'':6} {'ms/step':>9} {'val loss':>9} {'bits/byte':>9}")
for i in range(0, len(runs), 2):
    k, t = runs[i], runs[i + 1]
    k_ms = 1000 * 32 * 64 / k["tokens_per_sec"]  # the default batch 32 x context 64
    rows.append((k_ms, k["val_loss"], t["ms_per_step"], t["val_loss"]))
    print(f"{i // 2 + 1:>4} {'kiln':6} {k_ms:9.1f} {k['val_loss']:9.4f} {k['val_bits_per_byte']:9.4f}")
    print(f"{'':>4} {'torch':6} {t['ms_per_step']:9.1f} {t['val_loss']:9.4f} {t['val_bits_per_byte']:9.4f}")
mean = [statistics.mean(c) for c in zip(*rows)]
print(f"mean over {len(rows)} seed(s), {steps} steps: kiln {mean[0]:.1f} ms/step, val loss {mean[1]:.4f}; "
      f"torch {runs[1]['torch']} {mean[2]:.1f} ms/step, val loss {mean[3]:.4f}")
print(f"kiln / torch step time: {mean[0] / mean[2]:.2f}; val loss difference {mean[1] - mean[3]:+.4f} nats")
PY
