#!/usr/bin/env bash
# An ISA-specific GEMM object defines nothing the rest of the binary could share: every symbol
# it exports is one of its entry points or names its own namespace (the AVX-512 Eigen build's
# renamed Eigen namespace: a template of std or Eigen over those types is distinct too). A
# shared inline function or template (an Eigen or std one) would let the linker run AVX-512
# code on any CPU.
# $1: nm's listing of the object's archives (BUILD.bazel's genrules); $2: a symbol the listing
# must define (so an empty listing fails); $3: an extended regex of what it may export.
set -euo pipefail
listing=$1 required=$2 allowed=$3
grep -qF "$required" "$listing" || { echo "FAIL: no $required in the listing $listing"; exit 1; }
leaks=$(awk '$2 ~ /^[TWVBDRu]$/ { $1 = ""; $2 = ""; print }' "$listing" |
  grep -v -E "$allowed"'|DW\.ref\.__gxx_personality_v0|_*(a|t|ub)san|__odr_asan|__sancov|asan\.|^ *(__bss_start|_edata|_end|_init|_fini)$' ||
  true)
if [[ -n "$leaks" ]]; then
  echo "FAIL: $listing: the object exports symbols others may share:"
  echo "$leaks" | sort -u | head -20
  exit 1
fi
echo "$listing: the object exports only its own symbols"
