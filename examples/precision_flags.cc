#include "examples/precision_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"

ABSL_FLAG(std::string, precision, "f32",
          "f32, bf16 or f16: the dtype the matmul layers compute in (parameters stay f32; f16 scales the loss)");
ABSL_FLAG(std::string, grad_sync, "f32", "f32 or bf16: the dtype gradients are all-reduced in");

namespace kiln {

absl::StatusOr<PrecisionFlags> PrecisionFlagsFromFlags() {
  PrecisionFlags f;
  const std::string precision = absl::GetFlag(FLAGS_precision);
  absl::StatusOr<nn::Precision> p = nn::ParsePrecision(precision);
  if (!p.ok())
    return absl::InvalidArgumentError(absl::StrCat("--precision=", precision, ": expected f32, bf16 or f16"));
  f.precision = *p;
  const std::string sync = absl::GetFlag(FLAGS_grad_sync);
  if (sync == "bf16") {
    f.grad_sync = DType::kBF16;
  } else if (sync != "f32") {
    return absl::InvalidArgumentError(absl::StrCat("--grad_sync=", sync, ": expected f32 or bf16"));
  }
  return f;
}

std::vector<std::pair<std::string, std::string>> PrecisionSettings(const PrecisionFlags& f) {
  return {{"--precision", nn::PrecisionName(f.precision)}, {"--grad_sync", f.grad_sync ? "bf16" : "f32"}};
}

}  // namespace kiln
