// Reading and writing the safetensors format (the file PyTorch and Burn users exchange
// weights in): an 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the raw little-endian data.
#ifndef KILN_NN_SAFETENSORS_H_
#define KILN_NN_SAFETENSORS_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "tensor/tensor_data.h"

namespace kiln::nn {

struct TensorFile {
  std::map<std::string, TensorData> tensors;
  std::map<std::string, std::string> metadata;  // the "__metadata__" entry
};

// Atomic: the file is written under a temporary name, flushed to disk, then renamed, so a
// crash leaves either the old file or the new one, never a torn one.
absl::Status WriteSafetensors(const std::string& path, const TensorFile& file);

// NotFound for a missing file; DataLoss, naming what is wrong, for a truncated or corrupt one.
absl::StatusOr<TensorFile> ReadSafetensors(const std::string& path);

}  // namespace kiln::nn

#endif  // KILN_NN_SAFETENSORS_H_
