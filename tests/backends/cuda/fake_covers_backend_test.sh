#!/usr/bin/env bash
# Every CUDA runtime and cuBLAS symbol that the CUDA backend's objects call is defined by the
# fake runtime (backends/cuda/fake). A call the fake lacks would bind to libcudart's in the
# binaries that link the fake: without a GPU an error, with one a real call in the middle of a
# measurement of the host path. Arguments: the backend's and the fake's library files.
set -euo pipefail

backend=()
fake=()
for f in "$@"; do
  case "$f" in
    *.so) ;;  # the archives hold the same objects
    */fake/*) fake+=("$f") ;;
    *) backend+=("$f") ;;
  esac
done

needed=$(nm -u "${backend[@]}" | awk '$1 == "U" { print $2 }' | grep -E '^(__cuda|cuda|cublas)' | sort -u)
defined=$(nm --defined-only "${fake[@]}" | awk '$2 == "T" { print $3 }' | sort -u)

# The backend calls a few dozen of them; far fewer means nm read nothing useful.
count=$(printf '%s\n' "$needed" | grep -c .)
if ((count < 20)); then
  echo "only $count CUDA symbols found in ${backend[*]}: is this the CUDA backend?" >&2
  exit 1
fi

missing=$(comm -23 <(printf '%s\n' "$needed") <(printf '%s\n' "$defined"))
if [[ -n "$missing" ]]; then
  echo "the CUDA backend calls these, which backends/cuda/fake does not define:" >&2
  printf '  %s\n' $missing >&2
  exit 1
fi
echo "all $count CUDA runtime and cuBLAS symbols the backend calls are in the fake"
