// The MLP steps of bench/eigen_mlp_step.h with Eigen's matrix products parallelised through
// OpenMP: the way a hand-written Eigen program uses its cores. OpenMP changes Eigen's inline
// GEMM code, so this file compiles Eigen in a namespace of its own (as the AVX-512 GEMM of
// backends/cpu/gemm_avx512.cc does) and kiln's Eigen code in the same binary is untouched
// (tests/backends/cpu/gemm_isolation_test checks that trick for the GEMM). Registers
// BM_StepEigenOpenMp/<step>/<threads>; bench/compare.py counts it with BM_StepEigen/<step>.
#ifndef _OPENMP
#error "bench/eigen_step_openmp.cc must be compiled with -fopenmp"
#endif
#define Eigen kiln_bench_openmp_eigen
#define EigenMlpStep EigenMlpStepOpenMp
#include <benchmark/benchmark.h>

#include "bench/eigen_mlp_step.h"

namespace kiln::bench {
namespace {

constexpr int64_t kBatch = 64;  // as step_bench.cc

void BM_StepEigenOpenMp(benchmark::State& state, std::initializer_list<int64_t> sizes, bool classify) {
  EigenMlpStepOpenMp step(std::vector<int64_t>(sizes), kBatch, classify, static_cast<int>(state.range(0)));
  const float first = step.Step();
  float last = first;
  for (auto _ : state) last = step.Step();
  state.counters["loss_first"] = first;
  state.counters["loss_last"] = last;
}
BENCHMARK_CAPTURE(BM_StepEigenOpenMp, mlp_784_256_256_10, {784, 256, 256, 10}, true)->Arg(2)->UseRealTime();
BENCHMARK_CAPTURE(BM_StepEigenOpenMp, tiny_10_100_100_1, {10, 100, 100, 1}, false)->Arg(2)->UseRealTime();

}  // namespace
}  // namespace kiln::bench
