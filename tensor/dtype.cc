#include "tensor/dtype.h"

namespace kiln {

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
  }
  return "?";
}

int64_t DTypeSize(DType dtype) {
  return VisitDType(dtype, [](auto v) { return static_cast<int64_t>(sizeof(v)); });
}

}  // namespace kiln
