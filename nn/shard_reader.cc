#include "nn/shard_reader.h"

#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nn/file_io.h"
#include "nn/safetensors.h"
#include "nn/shard_layout.h"
#include "tensor/crc32c.h"

namespace kiln::nn {
namespace {

std::string Described(DType dtype, absl::Span<const int64_t> dims) {
  return absl::StrCat(SafetensorsDTypeName(dtype), "[", absl::StrJoin(dims, ","), "]");
}

// The source files, each opened and checked against the index when first needed.
class Sources {
 public:
  Sources(const std::string& dir, const ShardIndex& index) : dir_(dir), index_(index), open_(index.files.size()) {}

  std::string PathOf(int64_t member) const { return absl::StrCat(dir_, "/", index_.files[member].file); }

  // Every file is there with its recorded size.
  absl::Status CheckPresent() const {
    for (int64_t h = 0; h < static_cast<int64_t>(index_.files.size()); ++h) {
      absl::StatusOr<InputFile> in = Open(h);
      if (!in.ok()) return in.status();
    }
    return absl::OkStatus();
  }

  // Member h's file, its header checked against the index.
  absl::StatusOr<const TensorDirectory*> Get(int64_t h) {
    if (open_[h]) return &open_[h]->layout;
    absl::StatusOr<InputFile> in = Open(h);
    if (!in.ok()) return in.status();
    absl::StatusOr<TensorDirectory> layout = ReadSafetensorsDirectory(*in);
    if (!layout.ok()) return layout.status();
    if (absl::Status s = CheckLayout(in->path(), *layout); !s.ok()) return s;
    open_[h] = std::make_unique<Source>(Source{*std::move(in), *std::move(layout)});
    return &open_[h]->layout;
  }

  // The chunk of `name` in member h's file (Get(h) first), verified, into `out`.
  absl::Status ReadChunk(int64_t h, const std::string& name, std::vector<char>& out) const {
    const Source& source = *open_[h];
    const TensorLocation& at = source.layout.tensors.at(name);
    out.resize(at.nbytes);
    if (absl::Status s = source.in.ReadAt(at.offset, out.data(), at.nbytes); !s.ok()) return s;
    const uint32_t recorded = index_.files[h].chunk_crc32c.at(name);
    const uint32_t computed = Crc32c(0, out.data(), out.size());
    if (recorded != computed) {
      return absl::DataLossError(
          absl::StrFormat("%s: the chunk of tensor %s was changed or damaged after it was written (crc32c recorded "
                          "%08x, computed %08x)",
                          source.in.path(), name, recorded, computed));
    }
    return absl::OkStatus();
  }

 private:
  struct Source {
    InputFile in;
    TensorDirectory layout;
  };

  absl::StatusOr<InputFile> Open(int64_t h) const {
    const std::string path = PathOf(h);
    absl::StatusOr<InputFile> in = InputFile::Open(path);
    if (absl::IsNotFound(in.status())) {
      return absl::NotFoundError(absl::StrCat(path, " is missing: the sharded checkpoint ", dir_,
                                              " is incomplete (its index lists the file)"));
    }
    if (!in.ok()) return in.status();
    if (in->size() != index_.files[h].bytes) {
      return absl::DataLossError(absl::StrCat(path, " has ", in->size(), " bytes, but the index records ",
                                              index_.files[h].bytes, ": it was changed after the index was written"));
    }
    return in;
  }

  // The file holds a chunk of every tensor of the index, of its size and dtype, and no other.
  absl::Status CheckLayout(const std::string& path, const TensorDirectory& layout) const {
    for (const auto& [name, tensor] : index_.plan.tensors) {
      const auto it = layout.tensors.find(name);
      if (it == layout.tensors.end()) {
        return absl::DataLossError(absl::StrCat(path, " has no tensor ", name, ", which the index records in it"));
      }
      const int64_t c = ShardChunkSize(tensor.shape.numel(), index_.plan.world);
      if (it->second.dtype != tensor.dtype || it->second.dims != Dims{c}) {
        return absl::DataLossError(absl::StrCat(path, ": tensor ", name, " is ",
                                                Described(it->second.dtype, it->second.dims),
                                                ", but the index records a chunk of ", Described(tensor.dtype, {c}),
                                                " (the file does not match its index)"));
      }
    }
    if (layout.tensors.size() != index_.plan.tensors.size()) {
      for (const auto& [name, at] : layout.tensors) {
        if (!index_.plan.tensors.contains(name)) {
          return absl::DataLossError(absl::StrCat(path, " has tensor ", name, ", which the index does not record"));
        }
      }
    }
    return absl::OkStatus();
  }

  const std::string& dir_;
  const ShardIndex& index_;
  std::vector<std::unique_ptr<Source>> open_;
};

// Tensor `name`'s part [range.begin, range.end) into `out`, from the source chunks that hold it.
absl::Status CopyRange(Sources& sources, const std::string& name, const ShardedTensor& tensor, int64_t source_world,
                       ShardRange range, TensorData& out) {
  if (range.begin >= range.end) return absl::OkStatus();  // padding only
  const int64_t c = ShardChunkSize(tensor.shape.numel(), source_world);
  const int64_t element = DTypeSize(tensor.dtype);
  std::vector<char> chunk;
  for (int64_t h = range.begin / c; h * c < range.end; ++h) {
    if (absl::Status s = sources.ReadChunk(h, name, chunk); !s.ok()) return s;
    const int64_t from = std::max(range.begin, h * c), to = std::min(range.end, h * c + c);
    std::memcpy(static_cast<char*>(out.raw()) + (from - range.begin) * element, chunk.data() + (from - h * c) * element,
                (to - from) * element);
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorData> ReadTensor(Sources& sources, const std::string& name, const ShardedTensor& tensor,
                                      int64_t source_world, int64_t world, int64_t member) {
  const int64_t numel = tensor.shape.numel();
  const ShardRange range = ShardRangeOf(numel, world, member);
  // Every source file this reads is checked against the index before anything is allocated,
  // and file 0 always: the allocation is then bounded by what the files hold.
  const int64_t c = ShardChunkSize(numel, source_world);
  if (numel > 0) {
    if (auto s = sources.Get(0); !s.ok()) return s.status();
  }
  for (int64_t h = range.begin < range.end ? range.begin / c : 0; range.begin < range.end && h * c < range.end; ++h) {
    if (auto s = sources.Get(h); !s.ok()) return s.status();
  }
  TensorData out;
  try {
    out = TensorData(world == 1 ? tensor.shape : Shape{ShardChunkSize(numel, world)}, tensor.dtype);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough memory to read tensor ", name));
  }
  if (absl::Status s = CopyRange(sources, name, tensor, source_world, range, out); !s.ok()) return s;
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, TensorData>> ReadShard(const std::string& dir, const ShardIndex& index,
                                                            int64_t world, int64_t member,
                                                            const ReadShardOptions& options) {
  if (world < 1 || world > kMaxShardMembers || member < 0 || member >= world) {
    return absl::InvalidArgumentError(absl::StrCat("member ", member, " of a world of ", world,
                                                   " is no member (worlds of 1 to ", kMaxShardMembers, " members)"));
  }
  if (absl::Status s = CheckShardPlan(index.plan, dir); !s.ok()) return s;
  if (absl::Status s = CheckShardCoverage(index, dir); !s.ok()) return s;
  Sources sources(dir, index);
  if (absl::Status s = sources.CheckPresent(); !s.ok()) return s;
  std::map<std::string, TensorData> out;
  for (const auto& [name, tensor] : index.plan.tensors) {
    if (options.parameters_only && IsOptimizerSlot(name)) continue;
    absl::StatusOr<TensorData> data = ReadTensor(sources, name, tensor, index.plan.world, world, member);
    if (!data.ok()) return data.status();
    out.emplace(name, *std::move(data));
    if (options.on_tensor) options.on_tensor(name);
  }
  return out;
}

}  // namespace kiln::nn
