// ReadShard with any bytes as one of a checkpoint's shard files: a status naming the file,
// never a crash, and what it returns has the layout's shapes. The index records the input's
// size and, where the input is a readable safetensors file, its chunks' CRCs, so that the
// fuzzer gets past the checks of size and checksum to the reading and copying of chunks.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "nn/shard_layout.h"
#include "nn/shard_reader.h"
#include "nn/shard_writer.h"

namespace {

using kiln::DType;
using kiln::Shape;
using namespace kiln::nn;  // NOLINT: a fuzz target

// The checkpoint tests/tools/make_sharded_checkpoint writes with N = 2 (the seeds are its
// files): shard 1 stays as written here, shard 0 is the input.
struct Checkpoint {
  std::string dir;
  ShardIndex index;
};

const Checkpoint& Fixed() {
  static const Checkpoint* checkpoint = [] {
    auto* c = new Checkpoint;
    char dir[] = "/tmp/kiln-shard-fuzz-XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    c->dir = dir;
    c->index.plan.world = 2;
    c->index.plan.stage = "optimizer";
    const std::pair<const char*, std::pair<Shape, DType>> params[] = {{"0.weight", {Shape{3, 5}, DType::kF32}},
                                                                      {"0.bias", {Shape{3}, DType::kF32}},
                                                                      {"1.weight", {Shape{2, 3}, DType::kBF16}},
                                                                      {"1.bias", {Shape{1}, DType::kBF16}}};
    for (const auto& [name, spec] : params) {
      for (const std::string prefix : {"", "exp_avg/", "exp_avg_sq/"}) {
        c->index.plan.tensors.emplace(prefix + name, ShardedTensor{spec.first, spec.second});
      }
    }
    MemberChunks chunks;
    for (const auto& [name, t] : c->index.plan.tensors) {
      chunks.emplace(name, kiln::TensorData(Shape{ShardChunkSize(t.shape.numel(), 2)}, t.dtype));
    }
    auto infos = WriteShardFiles(c->dir, c->index.plan, {{0, chunks}, {1, chunks}});
    if (!infos.ok()) std::abort();
    c->index.files = *infos;
    return c;
  }();
  return *checkpoint;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const Checkpoint& c = Fixed();
  const std::string path = c.dir + "/" + ShardFileName(0, 2);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), size);
  ShardIndex index = c.index;
  index.files[0].bytes = size;
  if (auto described = DescribeShardFile(c.dir, 0, 2); described.ok()) {
    for (auto& [name, crc] : index.files[0].chunk_crc32c) {
      if (described->chunk_crc32c.contains(name)) crc = described->chunk_crc32c.at(name);
    }
  }
  for (int64_t world = 1; world <= 3; ++world) {
    for (int64_t member = 0; member < world; ++member) {
      auto got = ReadShard(c.dir, index, world, member);
      if (!got.ok()) {
        if (got.status().message().find(path) == std::string::npos) std::abort();
        continue;
      }
      for (const auto& [name, t] : index.plan.tensors) {
        const Shape want = world == 1 ? t.shape : Shape{ShardChunkSize(t.shape.numel(), world)};
        if (got->at(name).shape() != want || got->at(name).dtype() != t.dtype) std::abort();
      }
    }
  }
  return 0;
}
