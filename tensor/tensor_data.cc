#include "tensor/tensor_data.h"

#include "absl/strings/str_cat.h"

namespace kiln {

TensorData::TensorData(Shape shape, DType dtype)
    : shape_(std::move(shape)), dtype_(dtype), bytes_(static_cast<size_t>(shape_.numel() * DTypeSize(dtype))) {}

void TensorData::CheckType(DType requested) const {
  if (requested != dtype_) {
    ThrowInvalidArgument("TensorData: elements of a %s%s tensor read as %s", DTypeName(dtype_), shape_.ToString(),
                         DTypeName(requested));
  }
}

double TensorData::AsDouble(int64_t i) const {
  return VisitDType(dtype_, [&](auto v) {
    using T = decltype(v);
    T x;
    std::memcpy(&x, bytes_.data() + i * sizeof(T), sizeof(T));
    return static_cast<double>(x);
  });
}

std::vector<double> TensorData::ToDoubles() const {
  std::vector<double> out(numel());
  for (int64_t i = 0; i < numel(); ++i) out[i] = AsDouble(i);
  return out;
}

std::string TensorData::ToString(int64_t max_elements) const {
  std::string s = absl::StrCat(DTypeName(dtype_), shape_.ToString(), " {");
  for (int64_t i = 0; i < numel() && i < max_elements; ++i) {
    absl::StrAppend(&s, i ? ", " : "", AsDouble(i));
  }
  if (numel() > max_elements) absl::StrAppend(&s, ", ...");
  return s + "}";
}

}  // namespace kiln
