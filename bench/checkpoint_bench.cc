// The checkpoint path's own costs, side by side in one run: CRC-32C over a checkpoint's bytes
// (kiln's SSE4.2 path and its table path) against zlib's crc32 (another polynomial, the
// checksum a user would reach for first), and what writing a checkpoint's file costs
// (nn::WriteSafetensors: write, fsync, rename), per byte.
#include <benchmark/benchmark.h>
#include <zlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "nn/safetensors.h"
#include "tensor/crc32c.h"

namespace {

std::vector<unsigned char> Bytes(size_t n) {
  std::vector<unsigned char> v(n);
  uint32_t x = 1;
  for (auto& b : v) b = static_cast<unsigned char>((x = x * 1664525 + 1013904223) >> 24);
  return v;
}

void BM_Crc32c(benchmark::State& state) {
  const auto v = Bytes(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(kiln::Crc32c(0, v.data(), v.size()));
  state.SetBytesProcessed(state.iterations() * v.size());
}

void BM_Crc32cTable(benchmark::State& state) {
  const auto v = Bytes(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(kiln::Crc32cPortable(0, v.data(), v.size()));
  state.SetBytesProcessed(state.iterations() * v.size());
}

void BM_ZlibCrc32(benchmark::State& state) {
  const auto v = Bytes(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(crc32(0, v.data(), static_cast<uInt>(v.size())));
  state.SetBytesProcessed(state.iterations() * v.size());
}

// The write a checksum rides along with: one f32 tensor of range(0) bytes, written atomically.
void BM_WriteSafetensors(benchmark::State& state) {
  const std::string dir = std::filesystem::temp_directory_path() / "kiln-checkpoint-bench";
  std::filesystem::create_directories(dir);
  kiln::nn::TensorFile file;
  const int64_t n = state.range(0) / 4;
  file.tensors.emplace("w", kiln::TensorData::FromVector(std::vector<float>(n, 0.5f), kiln::Shape({n})));
  for (auto _ : state) {
    if (!kiln::nn::WriteSafetensors(dir + "/w.safetensors", file).ok()) state.SkipWithError("write failed");
  }
  state.SetBytesProcessed(state.iterations() * state.range(0));
  std::filesystem::remove_all(dir);
}

BENCHMARK(BM_Crc32c)->Arg(64 << 10)->Arg(64 << 20);
BENCHMARK(BM_Crc32cTable)->Arg(64 << 10)->Arg(64 << 20);
BENCHMARK(BM_ZlibCrc32)->Arg(64 << 10)->Arg(64 << 20);
BENCHMARK(BM_WriteSafetensors)->Arg(64 << 20)->Unit(benchmark::kMillisecond);

}  // namespace
