#!/usr/bin/env bash
# Builds the CUDA tests, benchmark and training job here (--config=cuda) and packs them, with
# the shared libraries a CUDA machine may lack and the Fashion-MNIST files, into one folder
# that tools/gpu_check.sh runs on a GPU machine without Bazel (a lent GPU machine has the CUDA
# driver, cuBLAS and NCCL, but no Bazel and no network). The binaries travel as one xz archive
# (30 MB become 6), the data as it is (~36 MB in all):
#   tools/gpu_pack.sh [DIR]        (DIR defaults to .gpu, which git ignores)
#   then, there:  tools/gpu_check.sh DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
pack=${1:-.gpu}

# What gpu_check.sh runs: gtest binaries, the scripted test's two programs, the benchmark.
targets=(
  //tests/backends/cuda/... //tests/tensor/... //tests/autodiff:gradcheck_test
  //tests/distributed/... //tests/examples:train_multiprocess_cuda_test
  //bench:cuda_bench //bench:cuda_host_bench_real //examples:train //examples:gpt //tools:launch
)
./bazelw build --config=cuda "${targets[@]}"
programs=(bench/cuda_bench bench/cuda_host_bench_real examples/train examples/gpt tools/launch
  tests/distributed/gloo/process_group_worker)
for t in $(tools/gpu_check.sh --list-tests); do programs+=("$t"); done

rm -rf "$pack"
mkdir -p "$pack/data"
dest=$pack
pack=$(mktemp -d)
trap 'rm -rf "$pack"' EXIT
mkdir -p "$pack/bin" "$pack/lib/fallback"
# The bazel-bin layout is kept: each binary finds kiln's own libraries through its RUNPATH
# ($ORIGIN/../_solib_k8 and the like).
for p in "${programs[@]}"; do
  install -D -m 755 "bazel-bin/$p" "$pack/bin/$p"
  strip "$pack/bin/$p"
done
# Every library the programs load, except the CUDA toolkit's (the GPU machine has its own,
# matching its driver) and the C runtime's.
for p in "${programs[@]}"; do ldd "bazel-bin/$p"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  while read -r lib; do
    case "$lib" in
      */_solib_k8/*) install -D -m 755 "$lib" "$pack/bin/_solib_k8/$(basename "$lib")" ;;
      /usr/local/cuda/*) ;;
      */libc.so.* | */libm.so.* | */libdl.so.* | */librt.so.* | */libpthread.so.* | */libgcc_s.so.*) ;;
      # Used there only if its own is older than the one this was built against.
      */libstdc++.so.*) cp -L "$lib" "$pack/lib/fallback/" ;;
      *) cp -L "$lib" "$pack/lib/" ;;
    esac
  done
tar -cJf "$dest/kiln-gpu.tar.xz" -C "$pack" bin lib
cp /usr/share/datasets/fashion-mnist/*.gz "$dest/data/"
# examples/gpt's corpus: the plain files of fortunes (2.5 MB), as LoadTextCorpus reads them.
mkdir -p "$dest/data/fortunes"
find /usr/share/games/fortunes -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' -exec cp {} "$dest/data/fortunes/" \;
du -sh "$dest"
