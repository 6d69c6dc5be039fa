// The cuBLAS half of the fake (see fake_runtime.h): handles that remember only their stream,
// and GEMMs that are counted, not computed (into the stream's capture while it records), with
// the last one's types kept for tests.
#include <cublas_v2.h>

#include <mutex>

#include "backends/cuda/fake/counters.h"
#include "backends/cuda/fake/fake_runtime.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

using kiln::cuda::fake::Bump;
using kiln::cuda::fake::GlobalCounters;

namespace {

std::mutex gemm_mu;
kiln::cuda::fake::GemmCall last_gemm;

void RecordGemm(const kiln::cuda::fake::GemmCall& call) {
  std::lock_guard lock(gemm_mu);
  last_gemm = call;
}

void CountGemm(cublasHandle_t handle) {
  if (kiln::cuda::fake::Recording* r = kiln::cuda::fake::CaptureOf(handle->stream)) {
    ++r->kernels;
  } else {
    Bump(GlobalCounters().blas_calls);
  }
}

}  // namespace

kiln::cuda::fake::GemmCall kiln::cuda::fake::LastGemm() {
  std::lock_guard lock(gemm_mu);
  return last_gemm;
}

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t* handle) {
  *handle = new cublasContext;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t handle) {
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t /*handle*/, cublasMath_t /*mode*/) { return CUBLAS_STATUS_SUCCESS; }
const char* cublasGetStatusName(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_FROM_THE_FAKE";
}
const char* cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "an error of the fake cuBLAS";
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t, cublasOperation_t, int m, int n,
                                          int k, const void*, const void*, cudaDataType a_type, int, long long int,
                                          const void*, cudaDataType b_type, int, long long int, const void*, void*,
                                          cudaDataType c_type, int, long long int, int batches,
                                          cublasComputeType_t compute, cublasGemmAlgo_t) {
  RecordGemm({a_type, b_type, c_type, compute, m, n, k, batches});
  CountGemm(handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t, cublasOperation_t, int m, int n, int k,
                                   const void*, const void* const[], cudaDataType a_type, int, const void* const[],
                                   cudaDataType b_type, int, const void*, void* const[], cudaDataType c_type, int,
                                   int batches, cublasComputeType_t compute, cublasGemmAlgo_t) {
  RecordGemm({a_type, b_type, c_type, compute, m, n, k, batches});
  CountGemm(handle);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
