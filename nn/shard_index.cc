#include "nn/shard_index.h"

#include <algorithm>
#include <limits>
#include <new>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "nn/file_io.h"
#include "nn/safetensors.h"
#include "nn/shard_layout.h"

namespace kiln::nn {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxIndexBytes = uint64_t{256} << 20;
constexpr size_t kMaxRank = 64;
constexpr int64_t kMaxElements = int64_t{1} << 62;  // so that chunk arithmetic stays in int64

absl::Status Malformed(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, " is not a valid sharded checkpoint index: ", what));
}

absl::Status Unsound(const std::string& what, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(what, ": ", problem));
}

// A member of `object`, or null; never a copy.
const Json* Member(const Json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

std::string CrcText(uint32_t crc) { return absl::StrFormat("%08x", crc); }

// Exactly 8 lowercase hex digits, as CrcText writes them.
bool ParseCrc(const Json* json, uint32_t& crc) {
  if (json == nullptr || !json->is_string()) return false;
  const std::string& s = json->get_ref<const std::string&>();
  if (s.size() != 8 ||
      !std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isxdigit(c) && !absl::ascii_isupper(c); })) {
    return false;
  }
  return absl::SimpleHexAtoi(s, &crc);
}

bool ParseCount(const Json* json, uint64_t limit, uint64_t& out) {
  if (json == nullptr || !json->is_number_unsigned() || json->get<uint64_t>() > limit) return false;
  out = json->get<uint64_t>();
  return true;
}

absl::StatusOr<ShardedTensor> ParseTensor(const std::string& path, const std::string& name, const Json& json) {
  const Json* dtype = Member(json, "dtype");
  const Json* shape = Member(json, "shape");
  const std::optional<DType> d = dtype != nullptr && dtype->is_string()
                                     ? DTypeOfSafetensorsName(dtype->get_ref<const std::string&>())
                                     : std::nullopt;
  if (!d) return Malformed(path, absl::StrCat("tensor ", name, " has no dtype kiln reads"));
  if (shape == nullptr || !shape->is_array() || shape->size() > kMaxRank) {
    return Malformed(path, absl::StrCat("tensor ", name, " has no shape of at most ", kMaxRank, " dims"));
  }
  Dims dims;
  int64_t numel = 1;
  for (const Json& dim : *shape) {
    uint64_t d = 0;
    if (!ParseCount(&dim, kMaxElements, d) || (d != 0 && numel > kMaxElements / static_cast<int64_t>(d))) {
      return Malformed(
          path, absl::StrCat("tensor ", name, " has a bad shape (dims must be whole numbers, 2^62 elements at most)"));
    }
    numel *= static_cast<int64_t>(d);
    dims.push_back(static_cast<int64_t>(d));
  }
  return ShardedTensor{Shape(dims), *d};
}

absl::StatusOr<ShardFileInfo> ParseFile(const std::string& path, const Json& json) {
  ShardFileInfo info;
  uint64_t member = 0;
  const Json* file = Member(json, "file");
  const Json* chunks = Member(json, "chunks");
  if (!ParseCount(Member(json, "member"), kMaxShardMembers, member) || file == nullptr || !file->is_string() ||
      !ParseCount(Member(json, "bytes"), std::numeric_limits<int64_t>::max(), info.bytes) ||
      !ParseCrc(Member(json, "crc32c"), info.crc32c) || chunks == nullptr || !chunks->is_object()) {
    return Malformed(path, "a file entry lacks its member, file, bytes, crc32c (8 hex digits) or chunks");
  }
  info.member = static_cast<int64_t>(member);
  info.file = file->get<std::string>();
  for (const auto& [name, crc] : chunks->items()) {
    if (!ParseCrc(&crc, info.chunk_crc32c[name])) {
      return Malformed(path, absl::StrCat(info.file, ": the crc32c of chunk ", name, " is not 8 hex digits"));
    }
  }
  return info;
}

absl::StatusOr<ShardIndex> ParseJson(const Json& json, const std::string& path) {
  const Json* format = Member(json, "format");
  if (format == nullptr || *format != kShardIndexFormat) {
    return Malformed(path, absl::StrCat("its format is not ", kShardIndexFormat));
  }
  ShardIndex index;
  uint64_t world = 0;
  const Json* stage = Member(json, "stage");
  const Json* metadata = Member(json, "metadata");
  const Json* tensors = Member(json, "tensors");
  const Json* files = Member(json, "files");
  if (!ParseCount(Member(json, "world_size"), kMaxShardMembers, world) || stage == nullptr || !stage->is_string() ||
      metadata == nullptr || !metadata->is_object() || tensors == nullptr || !tensors->is_object() ||
      files == nullptr || !files->is_array()) {
    return Malformed(
        path, absl::StrCat("it lacks world_size (at most ", kMaxShardMembers, "), stage, metadata, tensors or files"));
  }
  index.plan.world = static_cast<int64_t>(world);
  index.plan.stage = stage->get<std::string>();
  for (const auto& [key, value] : metadata->items()) {
    if (!value.is_string()) return Malformed(path, absl::StrCat("metadata ", key, " is not a string"));
    index.plan.metadata[key] = value.get<std::string>();
  }
  for (const auto& [name, value] : tensors->items()) {
    absl::StatusOr<ShardedTensor> tensor = ParseTensor(path, name, value);
    if (!tensor.ok()) return tensor.status();
    index.plan.tensors.emplace(name, *std::move(tensor));
  }
  for (const Json& value : *files) {
    absl::StatusOr<ShardFileInfo> file = ParseFile(path, value);
    if (!file.ok()) return file.status();
    index.files.push_back(*std::move(file));
  }
  std::stable_sort(index.files.begin(), index.files.end(),
                   [](const ShardFileInfo& a, const ShardFileInfo& b) { return a.member < b.member; });
  return index;
}

}  // namespace

std::string ShardFileName(int64_t member, int64_t world) {
  return absl::StrCat("shard-", member, "-of-", world, ".safetensors");
}

absl::string_view ParameterOf(absl::string_view name) {
  const size_t slash = name.find('/');
  return slash == absl::string_view::npos ? name : name.substr(slash + 1);
}

absl::Status CheckShardPlan(const ShardPlan& plan, const std::string& what) {
  if (plan.world < 1 || plan.world > kMaxShardMembers) {
    return Unsound(what, absl::StrCat("world size ", plan.world, " is not in [1, ", kMaxShardMembers, "]"));
  }
  if (std::find(std::begin(kShardStages), std::end(kShardStages), plan.stage) == std::end(kShardStages)) {
    return Unsound(what, absl::StrCat("stage \"", absl::CHexEscape(plan.stage.substr(0, 32)),
                                      "\" is none of none, optimizer, gradients, parameters"));
  }
  for (const auto& [name, tensor] : plan.tensors) {
    const absl::string_view param = ParameterOf(name);
    if (name.empty() || name == "__metadata__" || param.empty() || param.size() + 1 == name.size() ||
        (param != name && (IsOptimizerSlot(param) || !plan.tensors.contains(std::string(param))))) {
      return Unsound(what, absl::StrCat("tensor \"", absl::CHexEscape(name.substr(0, 64)),
                                        "\" is neither a parameter (a path without '/') nor an optimizer slot "
                                        "\"<slot>/<path>\" of one"));
    }
    if (tensor.shape.numel() > kMaxElements) {
      return Unsound(what, absl::StrCat("tensor ", name, " has more than 2^62 elements"));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckShardCoverage(const ShardIndex& index, const std::string& what) {
  const int64_t world = index.plan.world;
  std::set<int64_t> members;
  for (const ShardFileInfo& f : index.files) {
    if (f.member >= world) {
      return Unsound(what, absl::StrCat("a shard file is listed for member ", f.member, " of a world of ", world));
    }
    if (!members.insert(f.member).second) {
      return Unsound(what, absl::StrCat("member ", f.member, " has two shard files: the shards overlap"));
    }
    if (f.file != ShardFileName(f.member, world)) {
      return Unsound(what,
                     absl::StrCat("member ", f.member, "'s shard file is \"", absl::CHexEscape(f.file.substr(0, 64)),
                                  "\", not ", ShardFileName(f.member, world)));
    }
    for (const auto& [name, tensor] : index.plan.tensors) {
      if (!f.chunk_crc32c.contains(name)) {
        return Unsound(what, absl::StrCat(f.file, " has no chunk of tensor ", name, ": the shards do not cover it"));
      }
    }
    if (f.chunk_crc32c.size() != index.plan.tensors.size()) {
      for (const auto& [name, crc] : f.chunk_crc32c) {
        if (!index.plan.tensors.contains(name)) {
          return Unsound(what, absl::StrCat(f.file, " has a chunk of tensor ", absl::CHexEscape(name.substr(0, 64)),
                                            ", which the index does not describe"));
        }
      }
    }
  }
  for (int64_t g = 0; g < world; ++g) {
    if (!members.contains(g)) {
      return Unsound(what, absl::StrCat("the index lists ", members.size(), " shard files for ", world,
                                        " members (member ", g, " has none): the shards do not cover the checkpoint"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SerializeShardIndex(const ShardIndex& index) {
  Json json = {{"format", kShardIndexFormat},     {"world_size", index.plan.world}, {"stage", index.plan.stage},
               {"metadata", index.plan.metadata}, {"tensors", Json::object()},      {"files", Json::array()}};
  for (const auto& [name, t] : index.plan.tensors) {
    json["tensors"][name] = {{"dtype", SafetensorsDTypeName(t.dtype)},
                             {"shape", std::vector<int64_t>(t.shape.dims().begin(), t.shape.dims().end())}};
  }
  for (const ShardFileInfo& f : index.files) {
    Json chunks = Json::object();
    for (const auto& [name, crc] : f.chunk_crc32c) chunks[name] = CrcText(crc);
    json["files"].push_back({{"member", f.member},
                             {"file", f.file},
                             {"bytes", f.bytes},
                             {"crc32c", CrcText(f.crc32c)},
                             {"chunks", chunks}});
  }
  try {
    return json.dump(1) + "\n";
  } catch (const Json::exception& e) {  // a name or metadata string that is not UTF-8
    return absl::InvalidArgumentError(absl::StrCat("cannot write the sharded checkpoint index: ", e.what()));
  }
}

absl::StatusOr<ShardIndex> ParseShardIndex(absl::string_view text, const std::string& path) {
  try {
    const Json json = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (json.is_discarded()) return Malformed(path, "it is not JSON");
    if (!json.is_object()) return Malformed(path, "it is not a JSON object");
    absl::StatusOr<ShardIndex> index = ParseJson(json, path);
    if (!index.ok()) return index.status();
    if (absl::Status s = CheckShardPlan(index->plan, path); !s.ok()) return s;
    if (absl::Status s = CheckShardCoverage(*index, path); !s.ok()) return s;
    return index;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough memory to read ", path));
  } catch (const Json::exception& e) {  // a string that is not UTF-8, met while converting
    return Malformed(path, e.what());
  }
}

absl::StatusOr<ShardIndex> ReadShardIndex(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kShardIndexFile);
  absl::StatusOr<InputFile> in = InputFile::Open(path);
  if (!in.ok()) {
    if (!absl::IsNotFound(in.status())) return in.status();
    return absl::NotFoundError(absl::StrCat(dir, " has no ", kShardIndexFile,
                                            ": it is no sharded checkpoint, or one whose writing was interrupted"));
  }
  if (in->size() > kMaxIndexBytes) {
    return Malformed(path, absl::StrCat("it has ", in->size(), " bytes, more than the ", kMaxIndexBytes, " allowed"));
  }
  std::string text(in->size(), '\0');
  if (absl::Status s = in->ReadAt(0, text.data(), text.size()); !s.ok()) return s;
  return ParseShardIndex(text, path);
}

}  // namespace kiln::nn
