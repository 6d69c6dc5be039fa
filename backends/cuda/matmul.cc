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
  const bool f64 = a.dtype == DType::kF64;
  const cudaDataType_t type = CudaType(a.dtype);
  const cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
  const double one64 = 1, zero64 = 0;
  const float one32 = 1, zero32 = 0;
  const void* alpha = f64 ? static_cast<const void*>(&one64) : &one32;
  const void* beta = f64 ? static_cast<const void*>(&zero64) : &zero32;
  const int64_t es = DTypeSize(a.dtype);
  const auto* base_a = static_cast<const std::byte*>(pa.t.data());
  const auto* base_b = static_cast<const std::byte*>(pb.t.data());
  auto* base_c = static_cast<std::byte*>(out.mutable_data());

  const std::optional<int64_t> stride_a = EvenStride(pa.offsets);
  const std::optional<int64_t> stride_b = EvenStride(pb.offsets);
  std::lock_guard lock(c.blas_mu);
  if (stride_a && stride_b) {
    const cublasStatus_t status = cublasGemmStridedBatchedEx(
        c.blas, pb.layout.op, pa.layout.op, static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), alpha,
        base_b + pb.offsets[0] * es, type, static_cast<int>(pb.layout.ld), *stride_b, base_a + pa.offsets[0] * es, type,
        static_cast<int>(pa.layout.ld), *stride_a, beta, base_c, type, static_cast<int>(n), m * n,
        static_cast<int>(batches), compute, CUBLAS_GEMM_DEFAULT);
    // The message only on failure: formatting it on every call cost more than the call's setup.
    if (status != CUBLAS_STATUS_SUCCESS) {
      cuda::ThrowIfCublas(status, absl::StrCat(a.device.ToString(), ": cublasGemmStridedBatchedEx"));
    }
    return out;
  }
  // Irregular batch offsets: arrays of per-batch pointers, copied to the device (from
  // pageable memory, so the host vector may go as soon as the call returns).
  std::vector<const void*> pointers(3 * batches);
  for (int64_t i = 0; i < batches; ++i) {
    pointers[i] = base_b + pb.offsets[i] * es;
    pointers[batches + i] = base_a + pa.offsets[i] * es;
    pointers[2 * batches + i] = base_c + i * m * n * es;
  }
  cuda::DeviceBuffer table(a.device, static_cast<int64_t>(pointers.size() * sizeof(void*)));
  cuda::ThrowIfCuda(
      cudaMemcpyAsync(table.data(), pointers.data(), pointers.size() * sizeof(void*), cudaMemcpyHostToDevice, c.stream),
      "matmul: cudaMemcpyAsync (batch pointers)");
  auto* const* ptrs = reinterpret_cast<void* const*>(table.data());
  cuda::ThrowIfCublas(
      cublasGemmBatchedEx(c.blas, pb.layout.op, pa.layout.op, static_cast<int>(n), static_cast<int>(m),
                          static_cast<int>(k), alpha, const_cast<const void* const*>(ptrs), type,
                          static_cast<int>(pb.layout.ld), const_cast<const void* const*>(ptrs + batches), type,
                          static_cast<int>(pa.layout.ld), beta, ptrs + 2 * batches, type, static_cast<int>(n),
                          static_cast<int>(batches), compute, CUBLAS_GEMM_DEFAULT),
      absl::StrCat(a.device.ToString(), ": cublasGemmBatchedEx"));
  return out;
}

}  // namespace kiln
