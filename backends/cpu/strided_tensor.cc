#include "backends/cpu/strided_tensor.h"

#include <memory>

#include "backends/cpu/allocator.h"

namespace kiln {
namespace cpu {

Buffer::Buffer(int64_t nbytes) : data_(AllocateBuffer(nbytes)), nbytes_(nbytes) {}

Buffer::~Buffer() { FreeBuffer(data_, nbytes_); }

}  // namespace cpu

template <>
cpu::StridedTensor cpu::StridedTensor::Empty(const Shape& shape, DType dtype, const CpuDevice& device) {
  return Dense(std::make_shared<cpu::Buffer>(shape.numel() * DTypeSize(dtype)), shape, dtype, device);
}

}  // namespace kiln
