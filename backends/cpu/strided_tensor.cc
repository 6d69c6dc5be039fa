#include "backends/cpu/strided_tensor.h"

#include "backends/cpu/allocator.h"
#include "tensor/strided_view.h"

namespace kiln::cpu {

Buffer::Buffer(int64_t nbytes) : data_(AllocateBuffer(nbytes)), nbytes_(nbytes) {}

Buffer::~Buffer() { FreeBuffer(data_, nbytes_); }

StridedTensor StridedTensor::Empty(const Shape& shape, DType dtype, const CpuDevice& device) {
  StridedTensor t;
  t.buffer = std::make_shared<Buffer>(shape.numel() * DTypeSize(dtype));
  t.shape = shape;
  t.strides = shape.ContiguousStrides();
  t.offset = 0;
  t.dtype = dtype;
  t.device = device;
  return t;
}

bool StridedTensor::IsContiguous() const { return strided::IsContiguous(shape, strides); }

}  // namespace kiln::cpu
