#!/usr/bin/env bash
# kiln next to LibTorch (Debian's libtorch-dev 1.13.1) on the same training steps, in one
# binary and one run. Installs libtorch-dev (about 200 packages) the first time; never part of
# the default build or CI.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! dpkg-query -W -f='${db:Status-Abbrev}' libtorch-dev 2>/dev/null | grep -q '^ii'; then
  sudo=(); ((EUID == 0)) || sudo=(sudo)
  "${sudo[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq libtorch-dev
fi
out=$(mktemp)
./bazelw run --config=libtorch //bench:step_bench -- --benchmark_repetitions=5 \
  --benchmark_enable_random_interleaving=true --benchmark_format=json "$@" > "$out"
python3 bench/compare.py "$out"
