#include "nn/shard_writer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "nn/file_io.h"
#include "nn/safetensors.h"
#include "nn/shard_layout.h"
#include "tensor/crc32c.h"

namespace kiln::nn {
namespace {

constexpr uint64_t kBlock = uint64_t{4} << 20;  // what DescribeShardFile reads at a time

std::string IndexPath(const std::string& dir) { return absl::StrCat(dir, "/", kShardIndexFile); }

// `dir` exists (made if missing), is a directory and no link, and holds no index yet.
absl::Status PrepareDir(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("the sharded checkpoint folder is empty");
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot create sharded checkpoint folder ", dir));
  }
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return absl::ErrnoToStatus(errno, absl::StrCat("cannot inspect ", dir));
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(dir, " is not a folder (links are not followed)"));
  }
  if (lstat(IndexPath(dir).c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat(dir, " holds a complete sharded checkpoint already (", kShardIndexFile,
                                                 "), and nothing is overwritten"));
  }
  return absl::OkStatus();
}

// Every tensor of the plan, each a 1-D chunk of its size and dtype, and nothing else.
absl::Status CheckChunks(const ShardPlan& plan, int64_t member, const MemberChunks& chunks) {
  const std::string who = absl::StrCat("member ", member, " of ", plan.world);
  if (member < 0 || member >= plan.world) return absl::InvalidArgumentError(absl::StrCat(who, " is no member"));
  for (const auto& [name, tensor] : plan.tensors) {
    const auto it = chunks.find(name);
    if (it == chunks.end()) return absl::InvalidArgumentError(absl::StrCat(who, " has no chunk of tensor ", name));
    const Shape want{ShardChunkSize(tensor.shape.numel(), plan.world)};
    if (it->second.shape() != want || it->second.dtype() != tensor.dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          who, ": the chunk of ", name, " is ", DTypeName(it->second.dtype()), it->second.shape().ToString(), ", not ",
          DTypeName(tensor.dtype), want.ToString(), " (tensor ", tensor.shape.ToString(), ")"));
    }
  }
  for (const auto& [name, chunk] : chunks) {
    if (!plan.tensors.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(who, " has a chunk of ", name, ", which the plan does not have"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardFileInfo> WriteMember(const std::string& dir, const ShardPlan& plan, int64_t member,
                                          const MemberChunks& chunks) {
  ShardFileInfo info{member, ShardFileName(member, plan.world), 0, 0, {}};
  const std::string path = absl::StrCat(dir, "/", info.file);
  const std::map<std::string, std::string> metadata = {
      {"format", kShardFileFormat}, {"member", absl::StrCat(member)}, {"world_size", absl::StrCat(plan.world)}};
  absl::StatusOr<std::string> header = EncodeSafetensorsHeader(path, chunks, metadata);
  if (!header.ok()) return header.status();
  std::vector<absl::string_view> pieces = {*header};
  info.crc32c = Crc32c(0, *header);
  for (const auto& [name, data] : chunks) {
    const absl::string_view bytes(static_cast<const char*>(data.raw()), static_cast<size_t>(data.nbytes()));
    pieces.push_back(bytes);
    info.crc32c = Crc32c(info.crc32c, bytes);
    info.chunk_crc32c[name] = Crc32c(0, bytes);
    info.bytes += bytes.size();
  }
  info.bytes += header->size();
  if (absl::Status s = WriteFileAtomically(path, pieces); !s.ok()) return s;
  return info;
}

}  // namespace

absl::StatusOr<std::vector<ShardFileInfo>> WriteShardFiles(const std::string& dir, const ShardPlan& plan,
                                                           const std::map<int64_t, MemberChunks>& local) {
  if (absl::Status s = CheckShardPlan(plan, "the sharded checkpoint plan"); !s.ok()) return s;
  for (const auto& [member, chunks] : local) {
    if (absl::Status s = CheckChunks(plan, member, chunks); !s.ok()) return s;
  }
  if (absl::Status s = PrepareDir(dir); !s.ok()) return s;
  std::vector<ShardFileInfo> out;
  for (const auto& [member, chunks] : local) {
    absl::StatusOr<ShardFileInfo> info = WriteMember(dir, plan, member, chunks);
    if (!info.ok()) return info.status();
    out.push_back(*std::move(info));
  }
  return out;
}

absl::StatusOr<ShardFileInfo> DescribeShardFile(const std::string& dir, int64_t member, int64_t world) {
  ShardFileInfo info{member, ShardFileName(member, world), 0, 0, {}};
  absl::StatusOr<InputFile> in = InputFile::Open(absl::StrCat(dir, "/", info.file));
  if (!in.ok()) return in.status();
  absl::StatusOr<TensorDirectory> layout = ReadSafetensorsDirectory(*in);
  if (!layout.ok()) return layout.status();
  std::string block(std::min(kBlock, in->size()), '\0');
  // The header, then each tensor in file order: the data tiles the rest exactly.
  std::vector<std::pair<uint64_t, std::string>> order;
  for (const auto& [name, at] : layout->tensors) order.emplace_back(at.offset, name);
  std::sort(order.begin(), order.end());
  std::string header(layout->data_start, '\0');
  if (absl::Status s = in->ReadAt(0, header.data(), header.size()); !s.ok()) return s;
  info.crc32c = Crc32c(0, header);
  for (const auto& [offset, name] : order) {
    uint32_t& chunk = info.chunk_crc32c[name];
    for (uint64_t at = offset, end = offset + layout->tensors.at(name).nbytes; at < end;) {
      const uint64_t n = std::min(kBlock, end - at);
      if (absl::Status s = in->ReadAt(at, block.data(), n); !s.ok()) return s;
      chunk = Crc32c(chunk, block.data(), n);
      info.crc32c = Crc32c(info.crc32c, block.data(), n);
      at += n;
    }
  }
  info.bytes = in->size();
  return info;
}

absl::Status WriteShardIndex(const std::string& dir, const ShardPlan& plan, std::vector<ShardFileInfo> files) {
  if (absl::Status s = CheckShardPlan(plan, "the sharded checkpoint plan"); !s.ok()) return s;
  std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) { return a.member < b.member; });
  const ShardIndex index{plan, std::move(files)};
  if (absl::Status s = CheckShardCoverage(index, absl::StrCat("the sharded checkpoint in ", dir)); !s.ok()) return s;
  for (const ShardFileInfo& f : index.files) {
    absl::StatusOr<InputFile> in = InputFile::Open(absl::StrCat(dir, "/", f.file));
    if (!in.ok()) return in.status();
    if (in->size() != f.bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat(in->path(), " has ", in->size(), " bytes, not the ", f.bytes, " its writer described"));
    }
  }
  absl::StatusOr<std::string> text = SerializeShardIndex(index);
  if (!text.ok()) return text.status();
  const absl::string_view pieces[] = {*text};
  return WriteNewFileAtomically(IndexPath(dir), pieces);
}

}  // namespace kiln::nn
