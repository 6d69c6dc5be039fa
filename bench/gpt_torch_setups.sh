#!/usr/bin/env bash
# Which threading set-up makes bench/gpt_torch.py fastest on this machine (issue 30 compares kiln
# with PyTorch at its best): torch's intra-op threads x OpenBLAS's threads, and the Prescott core
# Debian's OpenBLAS picks by itself on a CPU it does not know (bench/openblas_core.py), interleaved
# over REPS repetitions; the median ms/step of each. CONFIG: default (examples/gpt's) or large (issue 30's 6 x 384, context 256).
#
#   bench/gpt_torch_setups.sh [CONFIG] [STEPS] [REPS]     e.g. bench/gpt_torch_setups.sh large 8 3
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
config=${1:-default}
steps=${2:-20}
reps=${3:-3}
case $config in
  default) model=() ;;
  large) model=(--layers=6 --heads=6 --width=384 --context=256 --batch_size=8) ;;
  *) echo "bench/gpt_torch_setups.sh: CONFIG must be default or large, not '$config'" >&2; exit 2 ;;
esac
# name: environment and --threads
setups=(
  "torch2_blas2|OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2|2"
  "torch2_blas1|OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1|2"
  "torch1_blas2|OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=2|1"
  "torch2_blas2_prescott|OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 OPENBLAS_CORETYPE=Prescott|2"
)
grep -m1 'model name' /proc/cpuinfo
uptime
results=()
for rep in $(seq 1 "$reps"); do
  for setup in "${setups[@]}"; do
    IFS='|' read -r name env threads <<<"$setup"
    line=$(env $env /usr/bin/python3 bench/gpt_torch.py --steps="$steps" --threads="$threads" --eval_batches=1 \
      "${model[@]}")
    results+=("$name $line")
    echo "rep $rep $name: $line" >&2
  done
done
uptime
printf '%s\n' "${results[@]}" | /usr/bin/python3 -c "$(cat <<'PY'
import json, statistics, sys
runs = {}
for line in sys.stdin:
    name, record = line.split(" ", 1)
    runs.setdefault(name, []).append(json.loads(record))
for name, rs in runs.items():
    ms = statistics.median(r["ms_per_step"] for r in rs)
    print(f"{name:22} {ms:9.1f} ms/step  (OpenBLAS core, threads {rs[0]['openblas']})")
PY
)"
