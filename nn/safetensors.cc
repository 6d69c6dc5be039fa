#include "nn/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "nn/file_io.h"

namespace kiln::nn {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the format's own limit
constexpr size_t kMaxRank = 64;                       // far beyond any real tensor; keeps shapes and messages small

// The format's dtypes, kiln's first. The others have no kiln dtype, but their element sizes
// still let a file holding them be checked, so that a sound file of (say) U8 tensors is told
// apart from a damaged one.
struct Format {
  const char* name;
  int64_t size;  // bytes per element
  bool supported;
  DType dtype;  // when supported
};
constexpr Format kFormats[] = {
    {"F64", 8, true, DType::kF64},      {"F32", 4, true, DType::kF32},      {"BF16", 2, true, DType::kBF16},
    {"F16", 2, true, DType::kF16},      {"I64", 8, true, DType::kI64},      {"I32", 4, true, DType::kI32},
    {"BOOL", 1, true, DType::kBool},    {"U64", 8, false, DType::kF32},     {"U32", 4, false, DType::kF32},
    {"U16", 2, false, DType::kF32},     {"I16", 2, false, DType::kF32},     {"U8", 1, false, DType::kF32},
    {"I8", 1, false, DType::kF32},      {"F8_E4M3", 1, false, DType::kF32}, {"F8_E5M2", 1, false, DType::kF32},
    {"F8_E8M0", 1, false, DType::kF32}, {"C64", 8, false, DType::kF32},
};
constexpr char kSupported[] = "F64, F32, BF16, F16, I64, I32, BOOL";

const char* FormatName(DType d) {
  for (const Format& f : kFormats) {
    if (f.supported && f.dtype == d) return f.name;
  }
  return nullptr;
}

const Format* FindFormat(const std::string& s) {
  for (const Format& f : kFormats) {
    if (s == f.name) return &f;
  }
  return nullptr;
}

absl::Status Corrupt(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, " is not a valid safetensors file: ", what));
}

// One tensor as the header describes it, checked against the file before anything is
// allocated for it.
struct Entry {
  std::string name;
  DType dtype;
  Dims dims;
  uint64_t begin, end;
  // A dtype kiln has no type for: the file may be sound, but the tensor cannot be read. Its
  // dtype string, escaped and cut short, for the error.
  std::optional<std::string> unsupported;
};

// A member of `object`, or null; never a copy (copying JSON recurses as deep as it nests).
const Json* Member(const Json& object, const char* key) {
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

// A dtype string from the file, fit for a message (it may be long or hold any bytes).
std::string Shown(const std::string& s) {
  constexpr size_t kMaxShown = 32;
  const std::string escaped = absl::CHexEscape(s.substr(0, kMaxShown));
  return s.size() > kMaxShown ? absl::StrCat("\"", escaped, "...\"") : absl::StrCat("\"", escaped, "\"");
}

// The entry's dtype; the bytes per element, 0 for a dtype of unknown size.
absl::StatusOr<uint64_t> ParseDType(const std::string& path, const Json& json, Entry& entry) {
  const Json* dtype = json.is_object() ? Member(json, "dtype") : nullptr;
  if (dtype == nullptr || !dtype->is_string()) {
    return Corrupt(path, absl::StrCat("tensor ", entry.name, " has no dtype"));
  }
  const std::string& dtype_name = dtype->get_ref<const std::string&>();
  const Format* format = FindFormat(dtype_name);
  if (format != nullptr && format->supported) {
    entry.dtype = format->dtype;
  } else {
    entry.unsupported = format != nullptr ? format->name : Shown(dtype_name);
  }
  // A dtype the format may gain later has no size we know: its byte range is only checked
  // to lie in the file (and, with the others, to tile the data).
  return format == nullptr ? 0 : static_cast<uint64_t>(format->size);
}

constexpr uint64_t kMaxInt64 = std::numeric_limits<int64_t>::max();

// The entry's dims from `shape`, a JSON array of at most kMaxRank dims.
absl::Status ParseShape(const std::string& path, const Json& shape, Entry& entry) {
  if (shape.size() > kMaxRank) {
    return Corrupt(path,
                   absl::StrFormat("tensor %s has %d dims, more than kiln's %d", entry.name, shape.size(), kMaxRank));
  }
  for (const Json& d : shape) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxInt64) {
      return Corrupt(
          path, absl::StrCat("tensor ", entry.name, " has a bad shape (each dim must be an integer in [0, 2^63))"));
    }
    entry.dims.push_back(static_cast<int64_t>(d.get<uint64_t>()));
  }
  return absl::OkStatus();
}

// The element count and byte size, checked for overflow. As in Shape, the non-zero dims
// must multiply within int64 even when another dim is 0. `described`: the entry for messages.
absl::StatusOr<uint64_t> ByteSize(const std::string& path, const Entry& entry, uint64_t element,
                                  const std::string& described) {
  uint64_t product = 1;
  bool empty = false;
  for (int64_t d : entry.dims) {
    if (d == 0) {
      empty = true;
    } else if (product > kMaxInt64 / static_cast<uint64_t>(d)) {
      return Corrupt(path, absl::StrCat("tensor ", entry.name, " is ", described, ", more elements than fit in int64"));
    } else {
      product *= static_cast<uint64_t>(d);
    }
  }
  const uint64_t count = empty ? 0 : product;
  if (element != 0 && count > kMaxInt64 / element) {
    return Corrupt(path, absl::StrCat("tensor ", entry.name, " is ", described, ", more bytes than fit in int64"));
  }
  return count * element;
}

absl::StatusOr<Entry> ParseEntry(const std::string& path, const std::string& name, const Json& json,
                                 uint64_t data_size) {
  Entry entry{name, DType::kF32, {}, 0, 0, std::nullopt};
  const absl::StatusOr<uint64_t> element = ParseDType(path, json, entry);
  if (!element.ok()) return element.status();
  const Json* shape = Member(json, "shape");
  const Json* offsets = Member(json, "data_offsets");
  if (shape == nullptr || offsets == nullptr || !shape->is_array() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() || !(*offsets)[1].is_number_unsigned()) {
    return Corrupt(path, absl::StrCat("tensor ", name, " lacks a shape or data_offsets"));
  }
  if (absl::Status s = ParseShape(path, *shape, entry); !s.ok()) return s;
  const std::string described = absl::StrCat(entry.unsupported ? *entry.unsupported : DTypeName(entry.dtype), "[",
                                             absl::StrJoin(entry.dims, ","), "]");
  const absl::StatusOr<uint64_t> bytes = ByteSize(path, entry, *element, described);
  if (!bytes.ok()) return bytes.status();
  entry.begin = (*offsets)[0].get<uint64_t>();
  entry.end = (*offsets)[1].get<uint64_t>();
  if (entry.begin > entry.end || entry.end > data_size || (*element != 0 && entry.end - entry.begin != *bytes)) {
    return Corrupt(path, absl::StrFormat("tensor %s: bytes [%d, %d) do not hold %s (%d bytes) in %d "
                                         "data bytes (truncated?)",
                                         name, entry.begin, entry.end, described, *bytes, data_size));
  }
  return entry;
}

// Reads `entry`'s bytes into a new tensor. Its size is at most the file's, which was checked
// before this allocates it.
absl::StatusOr<TensorData> ReadTensor(const InputFile& in, uint64_t data_start, const Entry& entry) {
  const std::string& path = in.path();
  TensorData data;
  try {
    data = TensorData(Shape(entry.dims), entry.dtype);
  } catch (const Error& e) {
    return Corrupt(path, absl::StrCat("tensor ", entry.name, ": ", e.status().message()));
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("%s: not enough memory for tensor %s (%d bytes)", path, entry.name, entry.end - entry.begin));
  }
  if (absl::Status s = in.ReadAt(data_start + entry.begin, data.raw(), entry.end - entry.begin); !s.ok()) {
    return Corrupt(path, absl::StrCat("tensor ", entry.name, " could not be read (", s.message(), ")"));
  }
  if (entry.dtype == DType::kBool) {
    const auto* bytes = static_cast<const unsigned char*>(data.raw());
    for (int64_t i = 0; i < data.nbytes(); ++i) {
      if (bytes[i] > 1) return Corrupt(path, absl::StrCat("tensor ", entry.name, " has a bool that is not 0 or 1"));
    }
  }
  return data;
}

// The header as JSON; `length`: its length in bytes, after the 8 that give it.
absl::StatusOr<Json> ReadHeader(const InputFile& in, const std::string& path, uint64_t& length) {
  const uint64_t size = in.size();
  if (size < 8) return Corrupt(path, absl::StrFormat("only %d bytes, no header length", size));
  unsigned char bytes[8];
  if (absl::Status s = in.ReadAt(0, bytes, 8); !s.ok()) return s;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[i];
  if (n > kMaxHeader || n > size - 8) {
    return Corrupt(path, absl::StrFormat("header of %d bytes in a file of %d bytes", n, size));
  }
  std::string text(n, '\0');
  if (absl::Status s = in.ReadAt(8, text.data(), n); !s.ok()) return s;
  Json header;
  try {
    header = Json::parse(text);
  } catch (const Json::exception& e) {
    return Corrupt(path, absl::StrCat("header is not JSON (", e.what(), ")"));
  }
  if (!header.is_object()) return Corrupt(path, "header is not a JSON object");
  length = n;
  return header;
}

// The header's metadata into `file`, and (unless `metadata_only`) its tensors' entries, each
// checked against the `data_size` bytes of data.
absl::Status ParseHeader(const std::string& path, const Json& header, uint64_t data_size, bool metadata_only,
                         TensorFile& file, std::vector<Entry>& entries) {
  for (const auto& [name, json] : header.items()) {
    if (name == "__metadata__") {
      if (!json.is_object()) return Corrupt(path, "__metadata__ is not an object");
      for (const auto& [key, value] : json.items()) {
        if (!value.is_string()) return Corrupt(path, absl::StrCat("metadata ", key, " is not a string"));
        file.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    if (metadata_only) continue;
    absl::StatusOr<Entry> entry = ParseEntry(path, name, json, data_size);
    if (!entry.ok()) return entry.status();
    entries.push_back(*std::move(entry));
  }
  return absl::OkStatus();
}

// The entries' byte ranges tile the data exactly: no overlap, no gap.
absl::Status CheckTiling(const std::string& path, const std::vector<Entry>& entries, uint64_t data_size) {
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Entry& e : entries) ranges.emplace_back(e.begin, e.end);
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != at) return Corrupt(path, absl::StrFormat("tensor data overlaps or has a gap at byte %d", at));
    at = end;
  }
  if (at != data_size) {
    return Corrupt(path, absl::StrFormat("%d data bytes but the tensors cover %d", data_size, at));
  }
  return absl::OkStatus();
}

// The file is sound; a tensor kiln has no dtype for is the caller's problem, not damage.
absl::Status CheckSupported(const std::string& path, const std::vector<Entry>& entries) {
  for (const Entry& e : entries) {
    if (e.unsupported) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": tensor ", e.name, " has dtype ", *e.unsupported,
                                                     ", which kiln does not read (it reads ", kSupported,
                                                     "; convert the tensor to one of them before saving)"));
    }
  }
  return absl::OkStatus();
}

// The header of `in` parsed and checked; with `metadata_only`, its metadata alone (the tensors
// neither checked nor listed). `data_start`: where the data begins.
absl::Status ReadLayout(const InputFile& in, bool metadata_only, TensorFile& file, std::vector<Entry>& entries,
                        uint64_t& data_start) {
  const std::string& path = in.path();
  uint64_t n = 0;
  const absl::StatusOr<Json> header = ReadHeader(in, path, n);
  if (!header.ok()) return header.status();

  // Every entry is checked, and the byte ranges are checked to tile the data exactly, before
  // any tensor is allocated: what is allocated is then at most the file's own size.
  const uint64_t data_size = in.size() - 8 - n;
  data_start = 8 + n;
  if (absl::Status s = ParseHeader(path, *header, data_size, metadata_only, file, entries); !s.ok()) return s;
  if (metadata_only) return absl::OkStatus();
  if (absl::Status s = CheckTiling(path, entries, data_size); !s.ok()) return s;
  return CheckSupported(path, entries);
}

// With `metadata_only`, the header's metadata alone: the tensors are neither checked nor read.
absl::StatusOr<TensorFile> Read(const std::string& path, bool metadata_only) {
  absl::StatusOr<InputFile> in = InputFile::Open(path);
  if (!in.ok()) return in.status();
  TensorFile file;
  std::vector<Entry> entries;
  uint64_t data_start = 0;
  if (absl::Status s = ReadLayout(*in, metadata_only, file, entries, data_start); !s.ok()) return s;
  for (const Entry& entry : entries) {
    absl::StatusOr<TensorData> data = ReadTensor(*in, data_start, entry);
    if (!data.ok()) return data.status();
    file.tensors.emplace(entry.name, *std::move(data));
  }
  return file;
}

}  // namespace

const char* SafetensorsDTypeName(DType dtype) { return FormatName(dtype); }

std::optional<DType> DTypeOfSafetensorsName(absl::string_view name) {
  for (const Format& f : kFormats) {
    if (f.supported && name == f.name) return f.dtype;
  }
  return std::nullopt;
}

absl::StatusOr<std::string> EncodeSafetensorsHeader(const std::string& path,
                                                    const std::map<std::string, TensorData>& tensors,
                                                    const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& [name, data] : tensors) {
    if (name == "__metadata__") return absl::InvalidArgumentError("a tensor may not be named __metadata__");
    const char* format = FormatName(data.dtype());
    if (format == nullptr) {  // every kiln dtype has one; a new one must be added to kFormats
      return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": tensor ", name, " is ",
                                                     DTypeName(data.dtype()), ", which safetensors lacks"));
    }
    header[name] = {{"dtype", format},
                    {"shape", std::vector<int64_t>(data.shape().dims().begin(), data.shape().dims().end())},
                    {"data_offsets", {offset, offset + data.nbytes()}}};
    offset += data.nbytes();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception& e) {  // a name or metadata string that is not UTF-8
    return absl::InvalidArgumentError(absl::StrCat("cannot write ", path, ": ", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(text.size()) >> (8 * i));
  return out + text;
}

absl::Status WriteSafetensors(const std::string& path, const TensorFile& file) {
  absl::StatusOr<std::string> header = EncodeSafetensorsHeader(path, file.tensors, file.metadata);
  if (!header.ok()) return header.status();
  std::vector<absl::string_view> pieces = {*header};  // the header, then the data in name order
  for (const auto& [name, data] : file.tensors) {
    pieces.emplace_back(static_cast<const char*>(data.raw()), static_cast<size_t>(data.nbytes()));
  }
  return WriteFileAtomically(path, pieces);
}

absl::StatusOr<TensorDirectory> ReadSafetensorsDirectory(const InputFile& in) {
  try {
    TensorFile file;
    std::vector<Entry> entries;
    TensorDirectory out;
    if (absl::Status s = ReadLayout(in, /*metadata_only=*/false, file, entries, out.data_start); !s.ok()) return s;
    out.metadata = std::move(file.metadata);
    for (const Entry& e : entries) {
      out.tensors.emplace(e.name, TensorLocation{e.dtype, e.dims, out.data_start + e.begin, e.end - e.begin});
    }
    return out;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough memory to read ", in.path()));
  }
}

absl::Status CheckWritable(const std::string& path) { return CheckWritableFile(path); }

absl::StatusOr<TensorFile> ReadSafetensors(const std::string& path) {
  // The header text and its JSON tree are as large as the file says (up to 100 MiB); a
  // machine without that memory gets a status, not an abort.
  try {
    return Read(path, /*metadata_only=*/false);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough memory to read ", path));
  }
}

absl::StatusOr<std::map<std::string, std::string>> ReadSafetensorsMetadata(const std::string& path) {
  try {
    absl::StatusOr<TensorFile> file = Read(path, /*metadata_only=*/true);
    if (!file.ok()) return file.status();
    return std::move(file->metadata);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat("not enough memory to read ", path));
  }
}

}  // namespace kiln::nn
