#include "backends/cuda/cuda_error.h"

#include "absl/strings/str_cat.h"
#include "tensor/error.h"

namespace kiln::cuda {

absl::Status CudaStatus(cudaError_t error, absl::string_view what) {
  if (error == cudaSuccess) return absl::OkStatus();
  const std::string message = absl::StrCat(what, ": ", cudaGetErrorName(error), ": ", cudaGetErrorString(error));
  if (error == cudaErrorMemoryAllocation) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status CublasStatus(cublasStatus_t status, absl::string_view what) {
  if (status == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  const std::string message =
      absl::StrCat(what, ": ", cublasGetStatusName(status), ": ", cublasGetStatusString(status));
  if (status == CUBLAS_STATUS_ALLOC_FAILED) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

void ThrowIfCuda(cudaError_t error, absl::string_view what) {
  if (error != cudaSuccess) {
    cudaGetLastError();  // a launch error is sticky until read; clear it for the next op
    throw Error(CudaStatus(error, what));
  }
}

void ThrowIfCublas(cublasStatus_t status, absl::string_view what) {
  if (status != CUBLAS_STATUS_SUCCESS) throw Error(CublasStatus(status, what));
}

}  // namespace kiln::cuda
