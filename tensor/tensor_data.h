// TensorData: a tensor's elements in host memory (row-major), with its shape and dtype.
// It is how values enter and leave every backend.
#ifndef KILN_TENSOR_TENSOR_DATA_H_
#define KILN_TENSOR_TENSOR_DATA_H_

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "tensor/dtype.h"
#include "tensor/error.h"
#include "tensor/shape.h"

namespace kiln {

class TensorData {
 public:
  TensorData() : TensorData(Shape{0}, DType::kF32) {}
  TensorData(Shape shape, DType dtype);  // zero-filled

  // Copies `values` (numel must match `shape`).
  template <class T>
  static TensorData FromVector(absl::Span<const T> values, Shape shape) {
    TensorData data(std::move(shape), DTypeOf<T>());
    if (static_cast<int64_t>(values.size()) != data.numel()) {
      ThrowInvalidArgument("TensorData: %d values given for shape %s, which holds %d", values.size(),
                           data.shape().ToString(), data.numel());
    }
    if (!values.empty()) std::memcpy(data.bytes_.data(), values.data(), values.size() * sizeof(T));
    return data;
  }
  template <class T>
  static TensorData FromVector(const std::vector<T>& values, Shape shape) {
    return FromVector(absl::Span<const T>(values), std::move(shape));
  }

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return shape_.numel(); }

  // Typed views; T must be the stored dtype's type (a mismatch throws InvalidArgument).
  template <class T>
  absl::Span<const T> values() const {
    CheckType(DTypeOf<T>());
    // Not a braced list: for bool, {pointer, size} would pick Span's initializer_list constructor.
    return absl::Span<const T>(reinterpret_cast<const T*>(bytes_.data()), static_cast<size_t>(numel()));
  }
  template <class T>
  absl::Span<T> mutable_values() {
    CheckType(DTypeOf<T>());
    return absl::Span<T>(reinterpret_cast<T*>(bytes_.data()), static_cast<size_t>(numel()));
  }
  // Element i converted to double, whatever the dtype (for tests and printing).
  double AsDouble(int64_t i) const;
  std::vector<double> ToDoubles() const;

  void* raw() { return bytes_.data(); }
  const void* raw() const { return bytes_.data(); }
  int64_t nbytes() const { return static_cast<int64_t>(bytes_.size()); }

  std::string ToString(int64_t max_elements = 16) const;  // "f32[2,2] {1, 2, 3, 4}"

 private:
  void CheckType(DType requested) const;
  Shape shape_;
  DType dtype_;
  std::vector<std::byte> bytes_;
};

}  // namespace kiln

#endif  // KILN_TENSOR_TENSOR_DATA_H_
