// Batched matmul through cuBLAS. Row-major C = A B is computed as the column-major product
// C^T = B^T A^T, so a row-major operand is passed as is and a transposed view (column-major)
// with op T: neither is copied. Batch dims, broadcast ones included, become a strided batch
// when each operand's batches are evenly spaced (stride 0 for a broadcast operand), and a
// pointer-array batch otherwise. bf16 and f16 are GemmEx calls on the half operands with f32
// accumulation (CUBLAS_COMPUTE_32F, f32 alpha and beta) writing the half result, rounded once.
#include <climits>
#include <optional>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/types/span.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/launch.h"
#include "tensor/shape_rules.h"

namespace kiln {

using cuda::StridedTensor;

namespace {

cudaDataType_t CudaType(DType dtype) {
  switch (dtype) {
    case DType::kF64: return CUDA_R_64F;
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

// How the last two dims of an operand lie in memory, as cuBLAS sees them.
struct MatrixLayout {
  cublasOperation_t op;  // CUBLAS_OP_N: row-major; CUBLAS_OP_T: column-major (a transpose)
  int64_t ld;
};

std::optional<MatrixLayout> LayoutOf(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) {
    return MatrixLayout{CUBLAS_OP_N, rows == 1 ? std::max<int64_t>(cols, 1) : std::max<int64_t>(rs, 1)};
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) {
    return MatrixLayout{CUBLAS_OP_T, cols == 1 ? std::max<int64_t>(rows, 1) : std::max<int64_t>(cs, 1)};
  }
  return std::nullopt;
}

struct Operand {
  StridedTensor t;  // possibly a contiguous copy of the input
  MatrixLayout layout;
  // Element offset of each batch, row-major over the batch dims (inline: most matmuls have
  // one batch or a few, and a heap vector per operand was a visible part of a small one).
  absl::InlinedVector<int64_t, 4> offsets;
};

Operand Prepare(const StridedTensor& p, const Shape& batch) {
  const int64_t r = p.shape.rank();
  const int64_t rows = p.shape[r - 2], cols = p.shape[r - 1];
  Operand op{p, {CUBLAS_OP_N, std::max<int64_t>(cols, 1)}, {}};
  if (auto layout = LayoutOf(rows, cols, p.strides[r - 2], p.strides[r - 1])) {
    op.layout = *layout;
  } else {
    op.t = Cuda::contiguous(p);
    op.layout = {CUBLAS_OP_N, std::max<int64_t>(cols, 1)};
  }
  const Dims strides = cuda::BroadcastStrides(op.t, batch, r - 2);
  const auto index = cuda::IndexFor<1>(batch, {strides}, "matmul");
  op.offsets.resize(batch.numel());
  for (int64_t b = 0; b < batch.numel(); ++b) index.Offsets(b, &op.offsets[b]);
  return op;
}

// The common stride of evenly spaced batch offsets, if they are.
std::optional<int64_t> EvenStride(absl::Span<const int64_t> offsets) {
  if (offsets.size() < 2) return 0;
  const int64_t stride = offsets[1] - offsets[0];
  for (size_t i = 2; i < offsets.size(); ++i) {
    if (offsets[i] - offsets[i - 1] != stride) return std::nullopt;
  }
  return stride;
}

void CheckFits(int64_t v, const char* what, const Shape& a, const Shape& b) {
  if (v > INT_MAX) {
    throw Error(absl::UnimplementedError(absl::StrCat("matmul of ", a.ToString(), " and ", b.ToString(), ": ", what,
                                                      " ", v, " exceeds cuBLAS's 32-bit limit")));
  }
}

constexpr double kOne64 = 1, kZero64 = 0;
constexpr float kOne32 = 1, kZero32 = 0;

// cuBLAS's types for a dtype: the operands', the accumulation's, and alpha = 1, beta = 0 in the latter.
struct GemmTypes {
  cudaDataType_t type;
  cublasComputeType_t compute;
  const void* alpha;
  const void* beta;
};

GemmTypes TypesOf(DType dtype) {
  const bool f64 = dtype == DType::kF64;
  return {.type = CudaType(dtype),
          .compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F,
          .alpha = f64 ? static_cast<const void*>(&kOne64) : &kOne32,
          .beta = f64 ? static_cast<const void*>(&kZero64) : &kZero32};
}

// One batched product C = A B (m x k times k x n per batch) into `c`, row-major.
struct BatchedGemm {
  const Operand& a;
  const Operand& b;
  int64_t m, n, k, batches;
  int64_t es;  // bytes per element
  GemmTypes types;
  std::byte* c;
};

// Evenly spaced batches: one strided-batched call.
void GemmStrided(cuda::DeviceContext& ctx, const BatchedGemm& g, int64_t stride_a, int64_t stride_b,
                 const CudaDevice& device) {
  const auto* base_a = static_cast<const std::byte*>(g.a.t.data());
  const auto* base_b = static_cast<const std::byte*>(g.b.t.data());
  const cublasStatus_t status = cublasGemmStridedBatchedEx(
      ctx.blas, g.b.layout.op, g.a.layout.op, static_cast<int>(g.n), static_cast<int>(g.m), static_cast<int>(g.k),
      g.types.alpha, base_b + g.b.offsets[0] * g.es, g.types.type, static_cast<int>(g.b.layout.ld), stride_b,
      base_a + g.a.offsets[0] * g.es, g.types.type, static_cast<int>(g.a.layout.ld), stride_a, g.types.beta, g.c,
      g.types.type, static_cast<int>(g.n), g.m * g.n, static_cast<int>(g.batches), g.types.compute,
      CUBLAS_GEMM_DEFAULT);
  // The message only on failure: formatting it on every call cost more than the call's setup.
  if (status != CUBLAS_STATUS_SUCCESS) {
    cuda::ThrowIfCublas(status, absl::StrCat(device.ToString(), ": cublasGemmStridedBatchedEx"));
  }
}

// Irregular batch offsets: arrays of per-batch pointers, copied to the device (from
// pageable memory, so the host vector may go as soon as the call returns).
void GemmPointers(cuda::DeviceContext& ctx, const BatchedGemm& g, const CudaDevice& device) {
  const auto* base_a = static_cast<const std::byte*>(g.a.t.data());
  const auto* base_b = static_cast<const std::byte*>(g.b.t.data());
  const int64_t batches = g.batches;
  std::vector<const void*> pointers(3 * batches);
  for (int64_t i = 0; i < batches; ++i) {
    pointers[i] = base_b + g.b.offsets[i] * g.es;
    pointers[batches + i] = base_a + g.a.offsets[i] * g.es;
    pointers[2 * batches + i] = g.c + i * g.m * g.n * g.es;
  }
  cuda::DeviceBuffer table(device, static_cast<int64_t>(pointers.size() * sizeof(void*)));
  cuda::ThrowIfCuda(cudaMemcpyAsync(table.data(), pointers.data(), pointers.size() * sizeof(void*),
                                    cudaMemcpyHostToDevice, ctx.stream),
                    "matmul: cudaMemcpyAsync (batch pointers)");
  auto* const* ptrs = reinterpret_cast<void* const*>(table.data());
  cuda::ThrowIfCublas(
      cublasGemmBatchedEx(ctx.blas, g.b.layout.op, g.a.layout.op, static_cast<int>(g.n), static_cast<int>(g.m),
                          static_cast<int>(g.k), g.types.alpha, const_cast<const void* const*>(ptrs), g.types.type,
                          static_cast<int>(g.b.layout.ld), const_cast<const void* const*>(ptrs + batches), g.types.type,
                          static_cast<int>(g.a.layout.ld), g.types.beta, ptrs + 2 * batches, g.types.type,
                          static_cast<int>(g.n), static_cast<int>(batches), g.types.compute, CUBLAS_GEMM_DEFAULT),
      absl::StrCat(device.ToString(), ": cublasGemmBatchedEx"));
}

}  // namespace

Cuda::Primitive Cuda::matmul(const Primitive& a, const Primitive& b) {
  const Shape out_shape = *MatmulShape(a.shape, b.shape).out;
  const int64_t r = out_shape.rank();
  const int64_t m = out_shape[r - 2], n = out_shape[r - 1], k = a.shape[a.shape.rank() - 1];
  const Shape batch(out_shape.dims().subspan(0, r - 2));
  cuda::DeviceContext& c = cuda::Context(a.device);
  cuda::Await(c, {&a, &b});
  StridedTensor out = StridedTensor::Empty(out_shape, a.dtype, a.device);
  const int64_t batches = batch.numel();
  if (out_shape.numel() == 0) return out;
  if (k == 0) {
    cuda::CheckLaunch(cuda::kernels::Fill(a.dtype, out.mutable_data(), out_shape.numel(), 0, 0, c.stream), "matmul",
                      a.device);
    return out;
  }
  const Operand pa = Prepare(a, batch);
  const Operand pb = Prepare(b, batch);
  for (int64_t v : {m, n, k, pa.layout.ld, pb.layout.ld, batches}) {
    CheckFits(v, "a size", a.shape, b.shape);
  }
  const BatchedGemm gemm{.a = pa,
                         .b = pb,
                         .m = m,
                         .n = n,
                         .k = k,
                         .batches = batches,
                         .es = DTypeSize(a.dtype),
                         .types = TypesOf(a.dtype),
                         .c = static_cast<std::byte*>(out.mutable_data())};
  const std::optional<int64_t> stride_a = EvenStride(pa.offsets);
  const std::optional<int64_t> stride_b = EvenStride(pb.offsets);
  std::lock_guard lock(c.blas_mu);
  if (stride_a && stride_b) {
    GemmStrided(c, gemm, *stride_a, *stride_b, a.device);
  } else {
    GemmPointers(c, gemm, a.device);
  }
  return out;
}

}  // namespace kiln
