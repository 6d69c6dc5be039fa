// The cuBLAS half of the fake (see fake_runtime.h): handles that remember only their stream,
// and GEMMs that are counted, not computed (into the stream's capture while it records).
#include <cublas_v2.h>

#include "backends/cuda/fake/counters.h"

struct cublasContext {
  cudaStream_t stream = nullptr;
};

using kiln::cuda::fake::Bump;
using kiln::cuda::fake::GlobalCounters;

namespace {

void CountGemm(cublasHandle_t handle) {
  if (kiln::cuda::fake::Recording* r = kiln::cuda::fake::CaptureOf(handle->stream)) {
    ++r->kernels;
  } else {
    Bump(GlobalCounters().blas_calls);
  }
}

}  // namespace

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

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t, cublasOperation_t, int, int, int,
                                          const void*, const void*, cudaDataType, int, long long int, const void*,
                                          cudaDataType, int, long long int, const void*, void*, cudaDataType, int,
                                          long long int, int, cublasComputeType_t, cublasGemmAlgo_t) {
  CountGemm(handle);
  return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGemmBatchedEx(cublasHandle_t handle, cublasOperation_t, cublasOperation_t, int, int, int,
                                   const void*, const void* const[], cudaDataType, int, const void* const[],
                                   cudaDataType, int, const void*, void* const[], cudaDataType, int, int,
                                   cublasComputeType_t, cublasGemmAlgo_t) {
  CountGemm(handle);
  return CUBLAS_STATUS_SUCCESS;
}

}  // extern "C"
