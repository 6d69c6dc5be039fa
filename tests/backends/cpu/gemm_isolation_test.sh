#!/usr/bin/env bash
# The AVX-512 GEMM object defines nothing the rest of the binary could share: every symbol it
# exports names its renamed Eigen namespace (a template of std or Eigen over those types is
# distinct too) or is one of its two entry points. A shared inline
# function or template (an Eigen or std one) would let the linker run AVX-512 code on any CPU.
# $1: nm's listing of the object's archives (BUILD.bazel's genrule).
set -euo pipefail
grep -q 'kiln::cpu::avx512::GemmBlockF32' "$1" || { echo "FAIL: no GemmBlockF32 in the listing $1"; exit 1; }
leaks=$(awk '$2 ~ /^[TWVBDRu]$/ { $1 = ""; $2 = ""; print }' "$1" |
  grep -v -E 'kiln_eigen_avx512::|^ *kiln::cpu::avx512::GemmBlockF(32|64)\(|DW\.ref\.__gxx_personality_v0|_*(a|t|ub)san|__odr_asan|__sancov|asan\.|^ *(__bss_start|_edata|_end|_init|_fini)$' ||
  true)
if [[ -n "$leaks" ]]; then
  echo "FAIL: the AVX-512 GEMM object exports symbols others may share:"
  echo "$leaks" | sort -u | head -20
  exit 1
fi
echo "the AVX-512 GEMM object exports only its own symbols"
