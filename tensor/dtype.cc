#include "tensor/dtype.h"

#include "tensor/error.h"

namespace kiln {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
  }
  return "?";
}

int64_t DTypeSize(DType dtype) {
  return VisitDType(dtype, [](auto v) { return static_cast<int64_t>(sizeof(v)); });
}

void ThrowNotComputedInHalf(DType dtype) {
  throw Error(absl::InternalError(absl::StrFormat(
      "a %s tensor reached a kernel that computes in its own type; half types compute in f32", DTypeName(dtype))));
}

}  // namespace kiln
