// StridedTensor: the CPU backend's primitive. A strided view (shape, strides, offset) of a shared,
// 64-byte aligned buffer (see allocator.h), so transpose, permute, slice and expand are free. Buffers are never
// written after the op that made them returns, which is what makes sharing safe.
#ifndef KILN_BACKENDS_CPU_STRIDED_TENSOR_H_
#define KILN_BACKENDS_CPU_STRIDED_TENSOR_H_

#include <cstddef>
#include <memory>

#include "backends/cpu/cpu_device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace kiln::cpu {

class Buffer {
 public:
  explicit Buffer(int64_t nbytes);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::byte* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }

 private:
  std::byte* data_;
  int64_t nbytes_;
};

struct StridedTensor {
  std::shared_ptr<Buffer> buffer;
  Shape shape{0};
  Dims strides{1};     // in elements; 0 for a broadcast dim
  int64_t offset = 0;  // in elements
  DType dtype = DType::kF32;
  CpuDevice device;

  // A fresh row-major tensor (contents uninitialised).
  static StridedTensor Empty(const Shape& shape, DType dtype, const CpuDevice& device);

  bool IsContiguous() const;
  template <class T>
  const T* data() const {
    return reinterpret_cast<const T*>(buffer->data()) + offset;
  }
  // Only for a tensor this op just created.
  template <class T>
  T* mutable_data() const {
    return reinterpret_cast<T*>(buffer->data()) + offset;
  }
};

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_STRIDED_TENSOR_H_
