#!/usr/bin/env bash
# kiln next to LibTorch (Debian's libtorch-dev 1.13.1) on the same training steps, in one
# binary and one interleaved run. Installs libtorch-dev (about 200 packages) and OpenBLAS the
# first time; never part of the default build or CI.
#
# LibTorch is given its best configuration found here: without OpenBLAS, Debian's LibTorch
# falls back to the reference BLAS (an MLP step took 23 ms); with OpenBLAS's own threads on
# top of LibTorch's two, the threads oversubscribe the 2 cores (4-18 ms). OpenBLAS from
# libopenblas0-pthread with OPENBLAS_NUM_THREADS=1 gave LibTorch's fastest steps (~1.2 ms).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
need=()
for p in libtorch-dev libopenblas0-pthread; do
  dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null | grep -q '^ii' || need+=("$p")
done
if ((${#need[@]})); then
  sudo=(); ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${need[@]}"
fi
out=$(mktemp)
OPENBLAS_NUM_THREADS=1 ./bazelw run --config=libtorch //bench:step_bench -- \
  --benchmark_repetitions=7 --benchmark_enable_random_interleaving=true \
  --benchmark_min_time=0.3 --benchmark_format=json "$@" > "$out"
python3 bench/compare.py "$out"
