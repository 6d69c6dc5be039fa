// CUDA, cuBLAS and NCCL return codes as absl::Status / kiln::Error, with the library's own
// error name and string, so a failure says which call failed on which device and why.
#ifndef KILN_BACKENDS_CUDA_CUDA_ERROR_H_
#define KILN_BACKENDS_CUDA_CUDA_ERROR_H_

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::cuda {

// OK for cudaSuccess; otherwise "<what>: <cudaErrorName>: <string>", ResourceExhausted for
// out-of-memory and Internal for the rest.
absl::Status CudaStatus(cudaError_t error, absl::string_view what);
absl::Status CublasStatus(cublasStatus_t status, absl::string_view what);

// Throws kiln::Error with the status above when the call failed.
void ThrowIfCuda(cudaError_t error, absl::string_view what);
void ThrowIfCublas(cublasStatus_t status, absl::string_view what);

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_CUDA_ERROR_H_
