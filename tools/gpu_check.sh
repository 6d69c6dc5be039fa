#!/usr/bin/env bash
# On a machine with a GPU: runs the CUDA tests (the CUDA cases of the conformance suite,
# gradient checks and distributed tests, tests/backends/cuda, the multi-process training
# test), the CUDA benchmark and the training job on the GPU, then prints a short summary.
#   tools/gpu_check.sh          builds with ./bazelw --config=cuda here, then runs
#   tools/gpu_check.sh DIR      runs a pack made by tools/gpu_pack.sh (for a GPU machine
#                               without Bazel: it brings kiln's binaries and libraries)
# A CUDA case that skips because no CUDA device works fails here (KILN_REQUIRE_ALL_BACKENDS);
# cases that need more GPUs than the machine has still skip, saying so. Logs: $LOGS
# (default /tmp/kiln_gpu_check), also as one gpu_check.tar.gz. SANITIZE=1 adds a pass of the
# device test and the f32 conformance cases under compute-sanitizer's memcheck; STEPS picks
# the parts (default "tests bench train"), BENCH_FILTER the benchmarks (a regex).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The gtest binaries with CUDA cases (bazel-bin paths), the worker that the process-group test
# starts as its argument.
tests=(
  tests/backends/cuda/allocator_test tests/backends/cuda/cuda_device_test tests/backends/cuda/fused_test
  tests/backends/cuda/scalar_ops_test tests/backends/cuda/strided_index_test
  tests/backends/cuda/captured_step_gpu_test tests/backends/cuda/half_cast_gpu_test
  tests/tensor/creation_test tests/tensor/elementwise_test tests/tensor/errors_test tests/tensor/integer_test
  tests/tensor/layout_test tests/tensor/matmul_test tests/tensor/reduce_test tests/tensor/memory_usage_test
  tests/autodiff/gradcheck_test
  tests/distributed/autodiff_collectives_test tests/distributed/collectives_test
  tests/distributed/data_parallel_test tests/distributed/gradient_sync_test tests/distributed/group_test
  tests/distributed/sharded_data_parallel_test
  tests/distributed/gloo/process_group_test tests/distributed/nccl/nccl_test
)
if [[ "${1:-}" == --list-tests ]]; then printf '%s\n' "${tests[@]}"; exit 0; fi
# Only the CUDA cases of the shared suites (typed names: cuda_f32, autodiff_cuda_f64, cuda).
filter='*cuda*:*Cuda*:*Nccl*:*OneGpu*:*StridedIndex*:*CachingAllocator*:*ScalarOps*'
jobs=${JOBS:-$(nproc)}
logs=${LOGS:-/tmp/kiln_gpu_check}
rm -rf "$logs" && mkdir -p "$logs/xml"

echo "== GPUs"
nvidia-smi -L 2>&1 || echo "(nvidia-smi not found)"
nvidia-smi --query-gpu=driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>/dev/null

if [[ $# -ge 1 ]]; then
  data=$(cd "$1" && pwd)/data
  pack=${TMPDIR:-/tmp}/kiln_gpu_pack
  rm -rf "$pack" && mkdir -p "$pack" && tar -xJf "$1/kiln-gpu.tar.xz" -C "$pack" || exit 1
  bin=$pack/bin
  # cuBLAS and NCCL come from this machine (they match its driver): the toolkit's folder, or
  # the nvidia-* Python wheels that PyTorch brings.
  libpath=$pack/lib
  for so in libcudart.so.13 libcublas.so.13 libnccl.so.2; do
    dir=$(find /usr/local/cuda*/ /usr/lib/x86_64-linux-gnu /opt /usr/local/lib -name "$so" \
      -printf '%h\n' 2>/dev/null | head -n 1)
    if [[ -z "$dir" ]]; then echo "gpu_check: $so not found on this machine"; continue; fi
    [[ ":$libpath:" == *":$dir:"* ]] || libpath=$libpath:$dir
  done
  export LD_LIBRARY_PATH=$libpath${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  if ldd "$bin/examples/train" 2>&1 | grep -q "GLIBCXX.*not found"; then
    export LD_LIBRARY_PATH=$pack/lib/fallback:$LD_LIBRARY_PATH
  fi
  echo "libraries: $LD_LIBRARY_PATH"
  ldd "$bin/examples/train" | grep -E "not found|cublas|nccl|cudart"
else
  bin=$PWD/bazel-bin
  data=/usr/share/datasets/fashion-mnist
  echo "== build (--config=cuda)"
  start=$(date +%s)
  if ! ./bazelw build --config=cuda --jobs="$jobs" //tests/... //bench:cuda_bench //bench:cuda_host_bench_real \
      //examples:train //tools:launch >"$logs/build.log" 2>&1; then
    tail -n 40 "$logs/build.log"
    echo "gpu_check: BUILD FAILED (log: $logs/build.log)"
    exit 1
  fi
  echo "built in $(( $(date +%s) - start ))s"
fi

run_test() {  # one gtest binary: its log and JUnit XML under $logs
  local t=$1 name=${1//\//_} extra=()
  [[ "$t" == tests/distributed/gloo/process_group_test ]] && extra=("$bin/tests/distributed/gloo/process_group_worker")
  local tmp
  tmp=$(mktemp -d)
  TEST_TMPDIR=$tmp KILN_REQUIRE_ALL_BACKENDS=1 timeout 300 "$bin/$t" "${extra[@]}" --gtest_filter="$filter" \
    --gtest_output="xml:$logs/xml/$name.xml" >"$logs/$name.log" 2>&1
  local rc=$?
  echo "$( ((rc == 0)) && echo PASSED || echo "FAILED (exit $rc)") $t"
  rm -rf "$tmp"
}

run_tests() {
  echo "== tests ($jobs at a time)"
  export -f run_test
  export bin logs filter
  local start rc tmp
  start=$(date +%s)
  printf '%s\n' "${tests[@]}" | xargs -P "$jobs" -I{} bash -c 'run_test {}' | sort -k2 | tee "$logs/tests.txt"
  tmp=$(mktemp -d)
  TEST_TMPDIR=$tmp timeout 300 tests/examples/train_multiprocess_cuda_test.sh "$bin/examples/train" \
    "$bin/tools/launch" >"$logs/train_multiprocess_cuda_test.log" 2>&1
  rc=$?
  echo "$( ((rc == 0)) && echo PASSED || echo "FAILED (exit $rc)") tests/examples/train_multiprocess_cuda_test:" \
    "$(tail -n 1 "$logs/train_multiprocess_cuda_test.log")" | tee -a "$logs/tests.txt"
  echo "tests ran in $(( $(date +%s) - start ))s"
  for f in $(grep -l "^\[  FAILED  \]" "$logs"/*.log 2>/dev/null); do
    echo "-- $(basename "$f"): $(grep -c "^\[  FAILED  \].*(" "$f") failed; the first:"
    grep -m 1 -A 6 "Failure" "$f"
  done
  ! grep -q FAILED "$logs/tests.txt"
}

run_bench() {
  echo "== benchmarks"
  timeout 300 "$bin/bench/cuda_bench" --benchmark_min_time=0.5 --benchmark_counters_tabular=true \
    --benchmark_filter="${BENCH_FILTER:-.}" 2>&1 |
    tee "$logs/bench.txt"
  # Host time per op with real launches (the same ops bench/README.md times over the fake
  # runtime without a GPU).
  timeout 120 "$bin/bench/cuda_host_bench_real" --benchmark_min_time=0.2 --benchmark_counters_tabular=true \
    --benchmark_filter="${BENCH_FILTER:-.}" 2>&1 |
    tee "$logs/host_bench.txt"
}

run_train() {
  echo "== training (examples/train, Fashion-MNIST)"
  local run
  for run in "mlp cuda:0" "cnn cuda:0" "mlp cpu:0"; do
    set -- $run
    timeout 200 "$bin/examples/train" --model="$1" --devices="$2" --epochs=1 --data_dir="$data" \
      >"$logs/train_$1_${2/:/}.log" 2>&1
    echo "$1 on $2, 1 epoch: $(tail -n 1 "$logs/train_$1_${2/:/}.log")"
  done | tee "$logs/train.txt"
  # examples/gpt, the same steps on the GPU and on the machine's cores.
  for run in cuda:0 cpu:0; do
    timeout 200 "$bin/examples/gpt" --devices="$run" --steps="${GPT_STEPS:-600}" --data_dir="$data/fortunes" \
      >"$logs/gpt_${run/:/}.log" 2>&1
    echo "gpt on $run, ${GPT_STEPS:-600} steps: $(tail -n 1 "$logs/gpt_${run/:/}.log")"
  done | tee -a "$logs/train.txt"
  # Issue 30's larger GPT (10.7M parameters) on the GPU: tokens/s, and model FLOP/s counted as
  # bench/gpt_step.h counts them (6 x 10,745,856 + 12 x 6 x 256 x 384 per token), to set beside
  # cuda_bench's cuBLAS Sgemm rate in bench.txt.
  local large=(--layers=6 --width=384 --heads=6 --context=256 --batch_size=8)
  timeout 300 "$bin/examples/gpt" --devices=cuda:0 "${large[@]}" --steps="${GPT_LARGE_STEPS:-300}" \
    --eval_every="${GPT_LARGE_STEPS:-300}" --data_dir="$data/fortunes" >"$logs/gpt_large_cuda0.log" 2>&1
  local last tokens
  last=$(tail -n 1 "$logs/gpt_large_cuda0.log")
  tokens=$(sed -n 's/.*"tokens_per_sec":\([0-9.]*\).*/\1/p' <<<"$last")
  echo "gpt (large) on cuda:0: $last; model TFLOP/s: $(awk -v t="${tokens:-0}" \
    'BEGIN { printf "%.2f", t * (6 * 10745856 + 12 * 6 * 256 * 384) / 1e12 }')" | tee -a "$logs/train.txt"
}

run_sanitize() {
  echo "== compute-sanitizer (memcheck)"
  local cs t rc ok=1
  cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for t in tests/backends/cuda/cuda_device_test tests/backends/cuda/fused_test tests/tensor/elementwise_test \
      tests/tensor/reduce_test tests/tensor/layout_test tests/tensor/matmul_test; do
    timeout 200 "$cs" --tool memcheck --error-exitcode 99 "$bin/$t" --gtest_filter='*cuda_f32*:Cuda*' \
      >"$logs/memcheck_${t##*/}.log" 2>&1
    rc=$?
    ((rc == 0)) || ok=0
    echo "memcheck $t: exit $rc, $(grep -m 1 "ERROR SUMMARY" "$logs/memcheck_${t##*/}.log")"
  done
  ((ok))
}

steps=" ${STEPS:-tests bench train} "
[[ "${SANITIZE:-0}" == 1 ]] && steps+="sanitize "
summary=()
for step in tests bench train sanitize; do
  [[ "$steps" == *" $step "* ]] || continue
  if "run_$step"; then summary+=("$step: ok"); else summary+=("$step: FAILED"); fi
done

echo "== summary"
printf '%s\n' "${summary[@]}"
if [[ "$steps" == *" tests "* ]]; then
  cat "$logs"/xml/*.xml 2>/dev/null | awk '
    /<testcase / { n++ }
    /<failure/ { f++ }
    /<skipped/ { s++ }
    END { printf "%d test cases: %d passed, %d failed, %d skipped\n", n, n - f - s, f, s }'
  echo "skip reasons:"
  cat "$logs"/xml/*.xml 2>/dev/null | grep -o '<skipped message="[^"]*' | cut -d'"' -f2 | sed 's/.*&#x0A;//' |
    sort | uniq -c
fi
if [[ "$steps" == *" bench "* ]]; then
  echo "kiln against its reference (last column: ratio, 1.0 = as fast):"
  grep -E "^BM_(Matmul|Add|TypedMatmul|TypedAdd|TinyAdd|Sum)" "$logs/bench.txt" | awk '{print "  " $1, $NF}'
fi
tar -czf "$logs/gpu_check.tar.gz" -C "$logs" --exclude=gpu_check.tar.gz . 2>/dev/null
! printf '%s\n' "${summary[@]}" | grep -q FAILED
