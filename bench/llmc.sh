#!/usr/bin/env bash
# llm.c's train_gpt2.c (Karpathy's CPU reference, a checkout you bring: it is never part of kiln)
# driven by bench/llmc_step.c: issue 30's larger GPT configuration by default, kiln's init, data
# and schedule, llm.c's own forward, backward and AdamW. Compiled with exactly the command llm.c's
# Makefile uses for its CPU build (`make -n train_gpt2`: -Ofast -march=native -fopenmp ...), our
# driver in place of train_gpt2.c, in a scratch folder outside the repository; run on
# OMP_NUM_THREADS (default 2) threads. Prints the driver's JSON line (ms_per_step, losses).
#
#   bench/llmc.sh LLMC_DIR [STEPS] [driver flags...]   e.g. bench/llmc.sh ~/llm.c 30 --batch_size=4
set -euo pipefail
if (($# < 1)) || [[ ! -f $1/train_gpt2.c || ! -f $1/Makefile ]]; then
  echo "usage: bench/llmc.sh LLMC_DIR [STEPS] [flags]: LLMC_DIR must hold llm.c's train_gpt2.c and Makefile" >&2
  exit 2
fi
llmc=$(cd "$1" && pwd)
steps=${2:-30}
shift $(($# >= 2 ? 2 : 1))
driver=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/llmc_step.c
build=${LLMC_BUILD_DIR:-${TMPDIR:-/tmp}/kiln-llmc-build}
mkdir -p "$build"
# The Makefile's own compile line for train_gpt2, with our driver and an output of ours.
compile=$(make -s -n -C "$llmc" train_gpt2 2>/dev/null | grep -E '(^| )train_gpt2\.c( |$)' | tail -n 1)
if [[ -z $compile ]]; then
  echo "bench/llmc.sh: llm.c's Makefile in $llmc gave no compile line for train_gpt2" >&2
  exit 2
fi
compile=${compile/ train_gpt2.c / -I$llmc $driver }
compile=${compile/-o train_gpt2/-o $build/llmc_step}
if [[ ! -x $build/llmc_step || $driver -nt $build/llmc_step || $llmc/train_gpt2.c -nt $build/llmc_step ]]; then
  echo "+ $compile" >&2
  (cd "$llmc" && eval "$compile") >&2
fi
OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} "$build/llmc_step" --steps="$steps" "$@" | tail -n 1
