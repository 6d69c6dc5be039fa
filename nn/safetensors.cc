#include "nn/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"

namespace kiln::nn {
namespace {

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // the format's own limit

const char* FormatName(DType d) {
  switch (d) {
    case DType::kF32: return "F32";
    case DType::kF64: return "F64";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kBool: return "BOOL";
  }
  return "?";
}

bool ParseFormatName(const std::string& s, DType* d) {
  static const std::pair<const char*, DType> kNames[] = {{"F32", DType::kF32}, {"F64", DType::kF64},
                                                         {"I32", DType::kI32}, {"I64", DType::kI64},
                                                         {"BOOL", DType::kBool}};
  for (const auto& [name, dtype] : kNames) {
    if (s == name) {
      *d = dtype;
      return true;
    }
  }
  return false;
}

absl::Status Errno(const std::string& what, const std::string& path) {
  return absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path));
}

absl::Status Corrupt(const std::string& path, const std::string& what) {
  return absl::DataLossError(absl::StrCat(path, " is not a valid safetensors file: ", what));
}

}  // namespace

absl::Status WriteSafetensors(const std::string& path, const TensorFile& file) {
  nlohmann::json header = nlohmann::json::object();
  if (!file.metadata.empty()) header["__metadata__"] = file.metadata;
  uint64_t offset = 0;
  for (const auto& [name, data] : file.tensors) {
    if (name == "__metadata__") return absl::InvalidArgumentError("a tensor may not be named __metadata__");
    header[name] = {{"dtype", FormatName(data.dtype())},
                    {"shape", std::vector<int64_t>(data.shape().dims().begin(), data.shape().dims().end())},
                    {"data_offsets", {offset, offset + data.nbytes()}}};
    offset += data.nbytes();
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  const uint64_t n = text.size();
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(n >> (8 * i));

  const std::string tmp = absl::StrCat(path, ".tmp.", getpid());
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) return Errno("cannot create", tmp);
  bool ok = std::fwrite(length, 1, 8, f) == 8 && std::fwrite(text.data(), 1, n, f) == n;
  for (const auto& [name, data] : file.tensors) {
    const size_t bytes = static_cast<size_t>(data.nbytes());
    ok = ok && std::fwrite(data.raw(), 1, bytes, f) == bytes;
  }
  ok = ok && std::fflush(f) == 0 && fsync(fileno(f)) == 0;
  const absl::Status write_error = ok ? absl::OkStatus() : Errno("cannot write", tmp);
  if (std::fclose(f) != 0 && write_error.ok()) return Errno("cannot close", tmp);
  if (!write_error.ok()) {
    std::remove(tmp.c_str());
    return write_error;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const absl::Status s = Errno("cannot rename onto", path);
    std::remove(tmp.c_str());
    return s;
  }
  // Make the rename itself durable.
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  if (int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY); fd >= 0) {
    fsync(fd);
    close(fd);
  }
  return absl::OkStatus();
}

absl::StatusOr<TensorFile> ReadSafetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  in.seekg(0, std::ios::end);
  const uint64_t size = static_cast<uint64_t>(in.tellg());
  in.seekg(0);
  if (size < 8) return Corrupt(path, absl::StrFormat("only %d bytes, no header length", size));
  unsigned char length[8];
  in.read(reinterpret_cast<char*>(length), 8);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | length[i];
  if (n > kMaxHeader || n > size - 8) {
    return Corrupt(path, absl::StrFormat("header of %d bytes in a file of %d bytes", n, size));
  }
  std::string text(n, '\0');
  in.read(text.data(), static_cast<std::streamsize>(n));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Corrupt(path, absl::StrCat("header is not JSON (", e.what(), ")"));
  }
  if (!header.is_object()) return Corrupt(path, "header is not a JSON object");

  const uint64_t data_size = size - 8 - n;
  TensorFile file;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return Corrupt(path, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return Corrupt(path, absl::StrCat("metadata ", key, " is not a string"));
        file.metadata[key] = value.get<std::string>();
      }
      continue;
    }
    DType dtype;
    if (!entry.is_object() || !entry.contains("dtype") || !entry["dtype"].is_string() ||
        !ParseFormatName(entry["dtype"].get<std::string>(), &dtype)) {
      return Corrupt(path, absl::StrCat("tensor ", name, " has no dtype kiln reads (F32, F64, I32, I64, BOOL)"));
    }
    const auto& shape_json = entry.value("shape", nlohmann::json());
    const auto& offsets = entry.value("data_offsets", nlohmann::json());
    if (!shape_json.is_array() || !offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return Corrupt(path, absl::StrCat("tensor ", name, " lacks a shape or data_offsets"));
    }
    Dims dims;
    for (const auto& d : shape_json) {
      if (!d.is_number_unsigned()) return Corrupt(path, absl::StrCat("tensor ", name, " has a bad shape"));
      dims.push_back(d.get<int64_t>());
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    TensorData data;
    try {
      data = TensorData(Shape(dims), dtype);
    } catch (const Error& e) {
      return Corrupt(path, absl::StrCat("tensor ", name, ": ", e.status().message()));
    }
    if (begin > end || end > data_size || end - begin != static_cast<uint64_t>(data.nbytes())) {
      return Corrupt(path, absl::StrFormat("tensor %s: bytes [%d, %d) do not hold %s%s in %d data bytes "
                                           "(truncated?)", name, begin, end, DTypeName(dtype),
                                           data.shape().ToString(), data_size));
    }
    in.seekg(static_cast<std::streamoff>(8 + n + begin));
    in.read(static_cast<char*>(data.raw()), static_cast<std::streamsize>(data.nbytes()));
    if (!in) return Corrupt(path, absl::StrCat("tensor ", name, " could not be read"));
    if (dtype == DType::kBool) {
      const auto* bytes = static_cast<const unsigned char*>(data.raw());
      for (int64_t i = 0; i < data.nbytes(); ++i) {
        if (bytes[i] > 1) return Corrupt(path, absl::StrCat("tensor ", name, " has a bool that is not 0 or 1"));
      }
    }
    ranges.emplace_back(begin, end);
    file.tensors.emplace(name, std::move(data));
  }
  // The data must be covered exactly, with no gaps or overlaps.
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (const auto& [begin, end] : ranges) {
    if (begin != at) return Corrupt(path, absl::StrFormat("tensor data overlaps or has a gap at byte %d", at));
    at = end;
  }
  if (at != data_size) {
    return Corrupt(path, absl::StrFormat("%d data bytes but the tensors cover %d", data_size, at));
  }
  return file;
}

}  // namespace kiln::nn
