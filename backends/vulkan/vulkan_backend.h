// Vulkan: GLSL compute kernels (compiled to SPIR-V at build time, embedded in the binary) on
// any Vulkan 1.2 device with buffer device addresses and 64-bit shader integers: AMD, Intel,
// NVIDIA, Apple through MoltenVK, or Mesa's lavapipe on a CPU. Built with --config=vulkan.
// f64 needs the device's shaderFloat64 (and f64 scatter_add its 64-bit atomics); without them
// an op on f64 is a clear Unimplemented error. bf16 and f16 need storageBuffer16BitAccess
// (Vulkan 1.1, which lavapipe has): kernels load and store them as uint16_t and do no 16-bit
// arithmetic. Casts to and from them are native and bit-exact with the CPU (shaders/half.glsl);
// every arithmetic op widens to f32, runs the f32 kernel and rounds once (HalfInF32). Without
// the feature, making a half tensor is an Unimplemented error naming the device.
#ifndef KILN_BACKENDS_VULKAN_VULKAN_BACKEND_H_
#define KILN_BACKENDS_VULKAN_VULKAN_BACKEND_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/vulkan/vulkan_device.h"
#include "backends/vulkan/vulkan_tensor.h"
#include "tensor/backend.h"
#include "tensor/fused_ops.h"
#include "tensor/memory_usage.h"
#include "tensor/tensor.h"

namespace kiln {

struct Vulkan {
  using Device = VulkanDevice;
  using Primitive = vulkan::VulkanTensor;

  static const char* Name() { return "vulkan"; }
  static absl::Status CheckDevice(const Device& d) { return vulkan::CheckDevice(d); }
  static absl::Status Available() { return vulkan::Available(); }
  // vulkan:0..vulkan:n-1, as virtual devices on the first physical device if there are fewer.
  static absl::StatusOr<std::vector<Device>> EnsureDevices(int n);
  static constexpr bool kDeviceOwnsAProcess = false;
  static constexpr bool kHalfTypes = true;  // bf16 and f16 kernels are done
  // The bytes the device's tensors hold (asked for: bool as 4 bytes an element, not the
  // memory pool's size classes or cache); throws kiln::Error for a device that does not exist.
  static MemoryUsage memory_usage(const Device& d);
  static void reset_peak_memory(const Device& d);

  static const Shape& shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive& p) { return p.device; }

  // The ops, declared from their rows in tensor/op_table.h (signatures and preconditions there).
  KILN_DECLARE_BACKEND_OPS()
  // The fused kernels (fused.cc); no optimizer updates: those are composed of the ops above.
  KILN_DECLARE_FUSED_KERNEL_OPS()

  // A row-major copy when `p` is a non-contiguous view; `p` itself otherwise.
  static Primitive contiguous(const Primitive& p);
  // Waits until every kernel queued on `device` has run (for benchmarks and timing).
  static void synchronize(const Device& device);
};

static_assert(Backend<Vulkan>);
static_assert(FusedSoftmax<Vulkan> && FusedNorm<Vulkan> && FusedGelu<Vulkan> && FusedCrossEntropy<Vulkan>);

namespace vulkan {
// Host memory <-> device without a TensorData in between (collectives stage through these):
// `host` holds shape.numel() elements of dtype in kiln's host layout (bool as 1 byte).
VulkanTensor FromHost(const void* host, const Shape& shape, DType dtype, const VulkanDevice& device);
void ToHost(const VulkanTensor& t, void* host);
}  // namespace vulkan

using VulkanTensorT = Tensor<Vulkan>;

}  // namespace kiln

#endif  // KILN_BACKENDS_VULKAN_VULKAN_BACKEND_H_
