#include "backends/cuda/strided_tensor.h"

#include <memory>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/cuda/context.h"
#include "tensor/error.h"

namespace kiln {
namespace cuda {

namespace {

// The pool of the capture running on `c`; throws when another thread captures the device
// (its work would land in that thread's graph: every op of a device shares one stream).
std::shared_ptr<GraphPool> CapturePool(DeviceContext& c) {
  std::lock_guard lock(c.capture_mu);
  if (c.capture_pool == nullptr) return nullptr;  // the capture ended meanwhile
  if (c.capture_thread != std::this_thread::get_id()) {
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        "cuda:", c.index,
        " is being captured into a CUDA graph by another thread: no other thread may use the device until the "
        "capture ends")));
  }
  return c.capture_pool;
}

}  // namespace

DeviceBuffer::DeviceBuffer(const CudaDevice& device, int64_t nbytes) : context_(&Lookup(device)), nbytes_(nbytes) {
  if (context_->capturing.load(std::memory_order_acquire)) [[unlikely]] {
    pool_ = CapturePool(*context_);
  }
  absl::StatusOr<CachingAllocator::Block> block =
      pool_ ? pool_->Allocate(static_cast<size_t>(nbytes)) : context_->memory->Allocate(static_cast<size_t>(nbytes));
  ThrowIfError(block.status());
  block_ = *block;
  context_->tensor_memory.Allocated(nbytes_);
}

DeviceBuffer::~DeviceBuffer() {
  context_->tensor_memory.Freed(nbytes_);
  if (pool_ != nullptr) {
    pool_->Free(block_);  // reserved for the graph as long as it lives
    return;
  }
  Event fence = this->fence();
  CachingAllocator::Ready ready;
  if (fence != nullptr) ready = [fence] { return cudaEventQuery(fence.get()) != cudaErrorNotReady; };
  if (context_->capturing.load(std::memory_order_acquire)) [[unlikely]] {
    // The capture may have recorded reads of this block: hold it for the graph's lifetime.
    std::shared_ptr<GraphPool> pool;
    {
      std::lock_guard lock(context_->capture_mu);
      pool = context_->capture_pool;
    }
    if (pool != nullptr) {
      pool->Keep(block_, std::move(ready));
      return;
    }
  }
  context_->memory->Free(block_, std::move(ready));  // stream-ordered: see allocator.h
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

}  // namespace cuda

template <>
cuda::StridedTensor cuda::StridedTensor::Empty(const Shape& shape, DType dtype, const CudaDevice& device) {
  return Dense(std::make_shared<cuda::DeviceBuffer>(device, shape.numel() * DTypeSize(dtype)), shape, dtype, device);
}

}  // namespace kiln
