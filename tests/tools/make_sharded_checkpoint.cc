// Writes a sharded checkpoint for consolidate_checkpoint_test: a small model's parameters and
// AdamW slots over N members, each member's file written as its own process would, then the
// index; and beside it the unsharded model.safetensors of the same parameters.
//
//   make_sharded_checkpoint DIR N EXPECTED
// Parameter k's element i is k + i / 4 (exact in bf16 as in f32), so that a reader written
// from the format alone can check every value.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "nn/safetensors.h"
#include "nn/shard_layout.h"
#include "nn/shard_writer.h"
#include "tensor/half.h"

namespace {

using namespace kiln;      // NOLINT: a test tool
using namespace kiln::nn;  // NOLINT

TensorData Values(const Shape& shape, DType dtype, int k) {
  TensorData data(shape, dtype);
  for (int64_t i = 0; i < data.numel(); ++i) {
    const float v = static_cast<float>(k) + static_cast<float>(i) / 4;
    if (dtype == DType::kF32) data.mutable_values<float>()[i] = v;
    if (dtype == DType::kBF16) data.mutable_values<BFloat16>()[i] = BFloat16(v);
  }
  return data;
}

TensorData Chunk(const TensorData& full, int64_t world, int64_t g) {
  const ShardRange r = ShardRangeOf(full.numel(), world, g);
  const int64_t e = DTypeSize(full.dtype());
  TensorData out(Shape{ShardChunkSize(full.numel(), world)}, full.dtype());
  std::memcpy(out.raw(), static_cast<const char*>(full.raw()) + r.begin * e, (r.end - r.begin) * e);
  return out;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "make_sharded_checkpoint: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t world = 0;
  if (argc != 4 || !absl::SimpleAtoi(argv[2], &world) || world < 1) return Fail("usage: DIR N EXPECTED");
  ShardPlan plan{.world = world, .stage = "optimizer", .metadata = {{"step", "7"}}, .tensors = {}};
  std::map<std::string, TensorData> full;
  const std::pair<const char*, std::pair<Shape, DType>> params[] = {{"0.weight", {Shape{3, 5}, DType::kF32}},
                                                                    {"0.bias", {Shape{3}, DType::kF32}},
                                                                    {"1.weight", {Shape{2, 3}, DType::kBF16}},
                                                                    {"1.bias", {Shape{1}, DType::kBF16}}};
  int k = 0;
  for (const auto& [name, spec] : params) {
    full.emplace(name, Values(spec.first, spec.second, k++));
    for (const char* slot : {"exp_avg/", "exp_avg_sq/"}) {
      full.emplace(std::string(slot) + name, Values(spec.first, spec.second, 100 + k));
    }
  }
  TensorFile expected{{}, {{"format", "pt"}}};
  for (const auto& [name, data] : full) {
    plan.tensors.emplace(name, ShardedTensor{data.shape(), data.dtype()});
    if (name.find('/') == std::string::npos) expected.tensors.emplace(name, data);
  }
  std::vector<ShardFileInfo> infos;
  for (int64_t g = 0; g < world; ++g) {
    MemberChunks chunks;
    for (const auto& [name, data] : full) chunks.emplace(name, Chunk(data, world, g));
    auto written = WriteShardFiles(argv[1], plan, {{g, chunks}});
    if (!written.ok()) return Fail(std::string(written.status().message()));
    infos.push_back((*written)[0]);
  }
  if (absl::Status s = WriteShardIndex(argv[1], plan, infos); !s.ok()) return Fail(std::string(s.message()));
  if (absl::Status s = WriteSafetensors(argv[3], expected); !s.ok()) return Fail(std::string(s.message()));
  return 0;
}
