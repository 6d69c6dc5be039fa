#include "nn/precision.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace kiln::nn {

const char* PrecisionName(Precision p) {
  switch (p) {
    case Precision::kF32: return "f32";
    case Precision::kBF16: return "bf16";
    case Precision::kF16: return "f16";
  }
  return "?";
}

absl::StatusOr<Precision> ParsePrecision(std::string_view name) {
  for (Precision p : {Precision::kF32, Precision::kBF16, Precision::kF16}) {
    if (name == PrecisionName(p)) return p;
  }
  return absl::InvalidArgumentError(absl::StrCat("precision \"", std::string(name), "\" is not one of f32, bf16, f16"));
}

}  // namespace kiln::nn
