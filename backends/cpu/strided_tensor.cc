#include "backends/cpu/strided_tensor.h"

#include <array>
#include <memory>

#include "backends/cpu/allocator.h"

namespace kiln {
namespace cpu {

MemoryCounter& TensorMemory(const CpuDevice& device) {
  // One per possible device (cpu::Configure allows 1024), never destroyed: buffers may be
  // freed during exit. An index past them (no such device) shares the last spare one.
  static auto* counters = new std::array<MemoryCounter, 1025>();
  const int index = device.index();
  return (*counters)[index >= 0 && index < 1024 ? index : 1024];
}

Buffer::Buffer(int64_t nbytes, const CpuDevice& device)
    : data_(AllocateBuffer(nbytes)), nbytes_(nbytes), counter_(&TensorMemory(device)) {
  counter_->Allocated(nbytes_);
}

Buffer::~Buffer() {
  counter_->Freed(nbytes_);
  FreeBuffer(data_, nbytes_);
}

}  // namespace cpu

template <>
cpu::StridedTensor cpu::StridedTensor::Empty(const Shape& shape, DType dtype, const CpuDevice& device) {
  return Dense(std::make_shared<cpu::Buffer>(shape.numel() * DTypeSize(dtype), device), shape, dtype, device);
}

}  // namespace kiln
