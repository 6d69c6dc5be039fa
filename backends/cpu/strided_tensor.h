// StridedTensor: the CPU backend's primitive, the shared StridedArray (tensor/strided_array.h)
// over a 64-byte aligned host buffer (see allocator.h).
#ifndef KILN_BACKENDS_CPU_STRIDED_TENSOR_H_
#define KILN_BACKENDS_CPU_STRIDED_TENSOR_H_

#include <cstddef>
#include <cstdint>

#include "backends/cpu/cpu_device.h"
#include "tensor/dtype.h"
#include "tensor/memory_usage.h"
#include "tensor/shape.h"
#include "tensor/strided_array.h"

namespace kiln {
namespace cpu {

// The bytes the tensor buffers of `device` hold: counted by Buffer, read by Cpu::memory_usage.
MemoryCounter& TensorMemory(const CpuDevice& device);

// A tensor's host memory, counted against its device (the bytes asked for: allocator.h's
// rounding and cache are the allocator's, not the tensor's).
class Buffer {
 public:
  Buffer(int64_t nbytes, const CpuDevice& device);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  std::byte* data() const { return data_; }
  int64_t nbytes() const { return nbytes_; }

 private:
  std::byte* data_;
  int64_t nbytes_;
  MemoryCounter* counter_;
};

using StridedTensor = StridedArray<Buffer, CpuDevice>;

}  // namespace cpu

// Allocates the Buffer (strided_tensor.cc).
template <>
cpu::StridedTensor cpu::StridedTensor::Empty(const Shape& shape, DType dtype, const CpuDevice& device);

}  // namespace kiln

#endif  // KILN_BACKENDS_CPU_STRIDED_TENSOR_H_
