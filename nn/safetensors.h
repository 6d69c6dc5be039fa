// Reading and writing the safetensors format (the file PyTorch and Burn users exchange
// weights in): an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw little-endian data.
#ifndef KILN_NN_SAFETENSORS_H_
#define KILN_NN_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nn/file_io.h"
#include "tensor/tensor_data.h"

namespace kiln::nn {

struct TensorFile {
  std::map<std::string, TensorData> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry
};

// Atomic: the file is written under a fresh random temporary name beside `path` (never
// through a link someone planted), flushed to disk, then renamed, so a crash leaves either
// the old file or the new one, never a torn one. A failure leaves the old file untouched.
absl::Status WriteSafetensors(const std::string& path, const TensorFile& file);

// Whether WriteSafetensors(path, ...) can write there: an error naming the problem (the
// directory is missing or unwritable, `path` is a directory or device) for a program to
// report before it trains rather than after. Leaves nothing behind.
absl::Status CheckWritable(const std::string& path);

// NotFound for a missing file; FailedPrecondition for a directory, FIFO or device (refused
// without reading it); DataLoss, naming what is wrong, for a truncated or corrupt one;
// ResourceExhausted, naming the tensor, if memory runs out. Sizes in the header are checked
// against the file before anything is allocated, so what is allocated is at most the file.
absl::StatusOr<TensorFile> ReadSafetensors(const std::string& path);

// The "__metadata__" of the file at `path` alone (its header read and parsed, the tensors
// neither checked nor read): cheap enough to look at every checkpoint in a folder. Errors as
// ReadSafetensors.
absl::StatusOr<std::map<std::string, std::string>> ReadSafetensorsMetadata(const std::string& path);

// The safetensors name of a kiln dtype ("F32", "BF16", ...), and the kiln dtype of a name
// kiln reads (nullopt for any other).
const char* SafetensorsDTypeName(DType dtype);
std::optional<DType> DTypeOfSafetensorsName(absl::string_view name);

// What a file of `tensors` begins with: the 8-byte header length and the header (with
// `metadata`), padded so that the data starts 8-byte aligned. The tensors' bytes follow in
// name order (the map's). WriteSafetensors writes this; `path` names the file in errors.
absl::StatusOr<std::string> EncodeSafetensorsHeader(const std::string& path,
                                                    const std::map<std::string, TensorData>& tensors,
                                                    const std::map<std::string, std::string>& metadata);

// Where a tensor lies in a file: `nbytes` bytes from byte `offset` of the file.
struct TensorLocation {
  DType dtype;
  Dims dims;
  uint64_t offset;
  uint64_t nbytes;
};
struct TensorDirectory {
  std::map<std::string, TensorLocation> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // where the data begins: the header's end
};

// The header of `in` alone, checked as ReadSafetensors checks it (the ranges lie in the file
// and tile its data, the dtypes are kiln's), so a reader can read just the tensors, or the
// parts of them, that it needs. Errors as ReadSafetensors.
absl::StatusOr<TensorDirectory> ReadSafetensorsDirectory(const InputFile& in);

}  // namespace kiln::nn

#endif  // KILN_NN_SAFETENSORS_H_
