#include "backends/cuda/strided_tensor.h"

#include "backends/cuda/context.h"
#include "tensor/error.h"
#include "tensor/strided_view.h"

namespace kiln::cuda {

DeviceBuffer::DeviceBuffer(const CudaDevice& device, int64_t nbytes) : memory_(Lookup(device).memory), nbytes_(nbytes) {
  absl::StatusOr<CachingAllocator::Block> block = memory_->Allocate(static_cast<size_t>(nbytes));
  ThrowIfError(block.status());
  block_ = *block;
}

DeviceBuffer::~DeviceBuffer() {
  Event fence = this->fence();
  if (fence == nullptr) {
    memory_->Free(block_);  // stream-ordered: see allocator.h
    return;
  }
  memory_->Free(block_, [fence] { return cudaEventQuery(fence.get()) != cudaErrorNotReady; });
}

void DeviceBuffer::SetFence(Event event) {
  std::lock_guard lock(mu_);
  fence_ = std::move(event);
  has_fence_.store(true, std::memory_order_release);
}

DeviceBuffer::Event DeviceBuffer::fence() const {
  if (!has_fence_.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(mu_);
  return fence_;
}

StridedTensor StridedTensor::Empty(const Shape& shape, DType dtype, const CudaDevice& device) {
  if (IsHalf(dtype)) {
    throw Error(absl::UnimplementedError(absl::StrFormat("%s: %s tensors are not implemented on the CUDA backend yet",
                                                         device.ToString(), DTypeName(dtype))));
  }
  StridedTensor t;
  t.buffer = std::make_shared<DeviceBuffer>(device, shape.numel() * DTypeSize(dtype));
  t.shape = shape;
  t.strides = shape.ContiguousStrides();
  t.offset = 0;
  t.dtype = dtype;
  t.device = device;
  return t;
}

bool StridedTensor::IsContiguous() const { return strided::IsContiguous(shape, strides); }

}  // namespace kiln::cuda
