#!/usr/bin/env bash
# On a machine with a GPU: builds with --config=cuda, runs the CUDA tests (the CUDA cases of
# the conformance suite, gradient checks and distributed tests, plus tests/backends/cuda) and
# the CUDA benchmarks, then prints a short summary. One command, ~5-8 minutes on 16 cores:
#   tools/gpu_check.sh            (JOBS=n to change the parallelism)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

jobs=${JOBS:-$(nproc)}
out=${TMPDIR:-/tmp}/kiln_gpu_check
mkdir -p "$out"
tests=(
  //tests/backends/cuda/...
  //tests/tensor/...
  //tests/autodiff:gradcheck_test
  //tests/distributed/...
  //tests/examples:train_multiprocess_cuda_test
)
# Only the CUDA cases of the shared suites (typed names: cuda_f32, autodiff_cuda_f64, cuda).
filter='*cuda*:*Cuda*:*Nccl*:*OneGpu*:*StridedIndex*:*CachingAllocator*:*ScalarOps*'

echo "== GPUs"
nvidia-smi -L 2>&1 || echo "(nvidia-smi not found)"

echo "== build (--config=cuda, --jobs=$jobs)"
start=$(date +%s)
if ! ./bazelw build --config=cuda --jobs="$jobs" "${tests[@]}" //bench:cuda_bench >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log"
  echo "gpu_check: BUILD FAILED (log: $out/build.log)"
  exit 1
fi
echo "built in $(( $(date +%s) - start ))s"

echo "== tests"
./bazelw test --config=cuda --jobs="$jobs" --test_filter="$filter" --test_output=errors \
  "${tests[@]}" >"$out/test.log" 2>&1
test_status=$?
grep -E "^//.*(PASSED|FAILED|TIMEOUT|NO STATUS)" "$out/test.log" || tail -n 30 "$out/test.log"
logs=$(./bazelw info --config=cuda bazel-testlogs 2>/dev/null)
cases=$(for t in "${tests[@]}"; do d=${t#//}; d=${d%/...}; d=${d%%:*}; find "$logs/$d" -name test.xml -print0; done |
  xargs -0 cat 2>/dev/null | awk '
    /<testcase / { n++ }
    /<failure/ { f++ }
    /<skipped/ { s++ }
    END { printf "%d test cases: %d passed, %d failed, %d skipped\n", n, n - f - s, f, s }')
skips=$(for t in "${tests[@]}"; do d=${t#//}; d=${d%/...}; d=${d%%:*}; find "$logs/$d" -name test.log -print0; done |
  xargs -0 grep -h "no CUDA device\|needs [0-9]* CUDA devices" 2>/dev/null | sort | uniq -c | head -5)

echo "== benchmarks"
./bazel-bin/bench/cuda_bench --benchmark_min_time=0.5 --benchmark_counters_tabular=true \
  2>&1 | tee "$out/bench.txt"
bench_status=${PIPESTATUS[0]}

echo "== summary"
echo "tests: $( ((test_status == 0)) && echo passed || echo FAILED ) ($cases)"
[[ -n "$skips" ]] && echo "skip reasons:" && echo "$skips"
echo "matmul kiln/cuBLAS (1.0 = as fast):"
grep -E "^BM_Matmul" "$out/bench.txt" | awk '{print "  " $0}'
echo "add vs memcpy, all-reduce bus bandwidth: see $out/bench.txt"
echo "benchmarks: $( ((bench_status == 0)) && echo ran || echo FAILED )"
(( test_status == 0 && bench_status == 0 ))
