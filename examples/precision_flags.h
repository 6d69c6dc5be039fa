// The mixed-precision flags, shared by examples/train and examples/gpt:
//   --precision=f32|bf16|f16  the dtype the matmul layers compute in (nn/precision.h); the
//                             parameters and the optimizer stay f32; f16 turns on dynamic loss
//                             scaling (nn/loss_scaler.h)
//   --grad_sync=f32|bf16      the dtype gradient buckets are all-reduced in (bf16: half the bytes)
#ifndef KILN_EXAMPLES_PRECISION_FLAGS_H_
#define KILN_EXAMPLES_PRECISION_FLAGS_H_

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nn/precision.h"
#include "tensor/dtype.h"

namespace kiln {

struct PrecisionFlags {
  nn::Precision precision = nn::Precision::kF32;
  std::optional<DType> grad_sync;  // none: the gradients' own dtype
  bool loss_scaling() const { return precision == nn::Precision::kF16; }
};

// The flags' current values, checked (InvalidArgument naming the flag and the value).
absl::StatusOr<PrecisionFlags> PrecisionFlagsFromFlags();

// (flag, value) pairs for the settings every rank, and a resumed run, must agree on.
std::vector<std::pair<std::string, std::string>> PrecisionSettings(const PrecisionFlags& flags);

}  // namespace kiln

#endif  // KILN_EXAMPLES_PRECISION_FLAGS_H_
