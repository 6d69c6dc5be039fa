// The bulk f32 <-> bf16/f16 conversions (backends/cpu/half_convert_paths.h), one thread, in one
// run: every path this CPU runs (the scalar loops are the reference) against memcpy of the f32
// side's bytes, the no-framework limit. 4,096 elements stay in L1 (the conversion's own speed,
// as inside a fused kernel's block); 16M elements go to memory. GB/s counts bytes read plus
// bytes written, for the conversions and memcpy alike.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "backends/cpu/half_convert_paths.h"

namespace kiln {
namespace {

enum Conversion { kBf16ToF32, kF32ToBf16, kF16ToF32, kF32ToF16 };
constexpr const char* kConversionNames[] = {"bf16->f32", "f32->bf16", "f16->f32", "f32->f16"};

struct Buffers {
  std::vector<float> f;
  std::vector<BFloat16> bf16;
  std::vector<Float16> f16;
  explicit Buffers(int64_t n) : f(n), bf16(n), f16(n) {
    std::mt19937 gen(1);
    std::normal_distribution<float> normal;
    for (int64_t i = 0; i < n; ++i) {
      f[i] = normal(gen);
      bf16[i] = BFloat16(f[i]);
      f16[i] = Float16(f[i]);
    }
  }
};

void SetBytes(benchmark::State& state, int64_t bytes) {
  state.counters["GB/s"] =
      benchmark::Counter(1e-9 * static_cast<double>(bytes), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Convert(benchmark::State& state) {
  const auto conversion = static_cast<Conversion>(state.range(0));
  const auto paths = cpu::HalfConvertPaths();
  if (state.range(1) >= static_cast<int64_t>(paths.size())) return state.SkipWithError("no such path");
  const cpu::HalfConvertPath& path = *paths[state.range(1)];
  if (!path.supported()) return state.SkipWithError("this CPU lacks what the path needs");
  const int64_t n = state.range(2);
  Buffers b(n);
  for (auto _ : state) {
    switch (conversion) {
      case kBf16ToF32: path.bf16_to_f32(b.bf16.data(), b.f.data(), n); break;
      case kF32ToBf16: path.f32_to_bf16(b.f.data(), b.bf16.data(), n); break;
      case kF16ToF32: path.f16_to_f32(b.f16.data(), b.f.data(), n); break;
      case kF32ToF16: path.f32_to_f16(b.f.data(), b.f16.data(), n); break;
    }
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(kConversionNames[conversion]) + " " + path.name);
  SetBytes(state, n * 6);
}

void BM_Memcpy(benchmark::State& state) {
  const int64_t n = state.range(0);
  const std::vector<float> from(n, 1.0f);
  std::vector<float> to(n);
  for (auto _ : state) {
    std::memcpy(to.data(), from.data(), n * sizeof(float));
    benchmark::ClobberMemory();
  }
  state.SetLabel("f32 bytes");
  SetBytes(state, n * 8);
}

// Paths 0 (scalar), 1 (avx2) and 2 (avx512; skipped on a CPU without it); the sizes interleaved
// with memcpy so a noisy moment hits all.
BENCHMARK(BM_Convert)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}, {4096}});
BENCHMARK(BM_Memcpy)->Arg(4096);
BENCHMARK(BM_Convert)->ArgsProduct({{0, 1, 2, 3}, {0, 1, 2}, {1 << 24}})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Memcpy)->Arg(1 << 24)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace kiln
