// Cpu: the Eigen backend. Kernels are vectorised (Eigen arrays and GEMM, or loops the compiler
// vectorises) and split across the device's threads; tensors are strided views.
#ifndef KILN_BACKENDS_CPU_CPU_BACKEND_H_
#define KILN_BACKENDS_CPU_CPU_BACKEND_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "backends/cpu/cpu_device.h"
#include "backends/cpu/strided_tensor.h"
#include "tensor/backend.h"
#include "tensor/fused_ops.h"
#include "tensor/tensor.h"

namespace kiln {

struct Cpu {
  using Device = CpuDevice;
  using Primitive = cpu::StridedTensor;

  static const char* Name() { return "cpu"; }
  // Logical devices exist once cpu::Configure (or the environment) made them.
  static absl::Status CheckDevice(const Device& d) { return cpu::CheckDevice(d); }
  static absl::Status Available() { return absl::OkStatus(); }
  // cpu:0..cpu:n-1, made if there are fewer (the cores shared fairly among them).
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

  // Fused kernels (tensor/fused_ops.h; backends/cpu/fused.cc).
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

  // Optimizer updates (tensor/fused_ops.h; backends/cpu/optimizer_kernels.cc).
  static SgdStep<Primitive> sgd_update(const Primitive& p, const Primitive& g, const Primitive* velocity, double lr,
                                       double momentum, double weight_decay, bool nesterov);
  static AdamWStep<Primitive> adamw_update(const Primitive& p, const Primitive& g, const Primitive* exp_avg,
                                           const Primitive* exp_avg_sq, double lr, double beta1, double beta2,
                                           double eps, double weight_decay, double c1, double c2);

  // A row-major copy when `p` is a non-contiguous view; `p` itself otherwise.
  static Primitive contiguous(const Primitive& p);
};

static_assert(Backend<Cpu>);
static_assert(FusedSoftmax<Cpu> && FusedNorm<Cpu> && FusedGelu<Cpu> && FusedCrossEntropy<Cpu>);
static_assert(FusedSgd<Cpu> && FusedAdamW<Cpu>);

using CpuTensor = Tensor<Cpu>;

}  // namespace kiln

#endif  // KILN_BACKENDS_CPU_CPU_BACKEND_H_
