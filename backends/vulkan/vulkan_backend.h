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

  static const Shape& shape(const Primitive& p) { return p.shape; }
  static DType dtype(const Primitive& p) { return p.dtype; }
  static Device device(const Primitive& p) { return p.device; }

  static Primitive from_data(const TensorData& data, const Device& device);
  static TensorData to_data(const Primitive& p);
  static Primitive full(const Shape& shape, Scalar value, DType dtype, const Device& device);
  static Primitive to_device(const Primitive& p, const Device& device);
  static Primitive cast(const Primitive& p, DType dtype);

  static Primitive unary(UnaryOp op, const Primitive& p);
  static Primitive binary(BinaryOp op, const Primitive& a, const Primitive& b);
  static Primitive where(const Primitive& cond, const Primitive& a, const Primitive& b);

  static Primitive reduce(ReduceOp op, const Primitive& p, absl::Span<const int64_t> dims, bool keepdim);
  static Primitive argmax(const Primitive& p, int64_t dim, bool keepdim);

  static Primitive matmul(const Primitive& a, const Primitive& b);

  static Primitive reshape(const Primitive& p, const Shape& shape);
  static Primitive permute(const Primitive& p, absl::Span<const int64_t> dims);
  static Primitive expand(const Primitive& p, const Shape& shape);
  static Primitive slice(const Primitive& p, int64_t dim, int64_t start, int64_t end, int64_t step);
  static Primitive cat(absl::Span<const Primitive> parts, int64_t dim);
  static Primitive gather(const Primitive& p, int64_t dim, const Primitive& index);
  static Primitive index_select(const Primitive& p, int64_t dim, const Primitive& index);
  static Primitive scatter_add(const Primitive& src, int64_t dim, const Primitive& index, const Shape& shape);

  // The fused kernels of tensor/fused_ops.h (fused.cc).
  static Primitive softmax_last(const Primitive& x, bool log, bool causal);
  static Primitive softmax_last_backward(const Primitive& y, const Primitive& gy, bool log, bool causal);
  static NormForward<Primitive> norm_last(const Primitive& x, const Primitive* weight, const Primitive* bias,
                                          double eps, bool rms);
  static NormBackward<Primitive> norm_last_backward(const Primitive& gy, const Primitive& x, const Primitive* weight,
                                                    const Primitive& mean, const Primitive& rstd, bool rms,
                                                    bool bias_grad);
  static Primitive gelu(const Primitive& x, bool tanh);
  static Primitive gelu_backward(const Primitive& x, const Primitive& gy, bool tanh);
  static CrossEntropyForward<Primitive> cross_entropy_rows(const Primitive& logits, const Primitive& targets,
                                                           int64_t ignore_index, double smoothing);
  static Primitive cross_entropy_rows_backward(const Primitive& logits, const Primitive& targets, const Primitive& lse,
                                               const Primitive& g, int64_t ignore_index, double smoothing);

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
