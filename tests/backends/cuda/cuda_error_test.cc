// CUDA and cuBLAS return codes as statuses: the call named, the library's error name and
// string, ResourceExhausted for out of memory and Internal for the rest; the Throw forms
// throw kiln::Error with that status. Runs without a GPU (the names and strings come from
// the runtime library, which needs no device).
#include "backends/cuda/cuda_error.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "tensor/error.h"

namespace kiln::cuda {
namespace {

TEST(CudaError, SuccessIsOk) {
  EXPECT_TRUE(CudaStatus(cudaSuccess, "cudaMemcpy").ok());
  EXPECT_TRUE(CublasStatus(CUBLAS_STATUS_SUCCESS, "cublasSgemm").ok());
  EXPECT_NO_THROW(ThrowIfCuda(cudaSuccess, "cudaMemcpy"));
  EXPECT_NO_THROW(ThrowIfCublas(CUBLAS_STATUS_SUCCESS, "cublasSgemm"));
}

TEST(CudaError, OutOfMemoryIsResourceExhausted) {
  const absl::Status s = CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc of 64 bytes on cuda:0");
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(s.message(), absl::StrCat("cudaMalloc of 64 bytes on cuda:0: cudaErrorMemoryAllocation: ",
                                      cudaGetErrorString(cudaErrorMemoryAllocation)));
  const absl::Status b = CublasStatus(CUBLAS_STATUS_ALLOC_FAILED, "cublasCreate");
  EXPECT_EQ(b.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(b.message(), absl::StrCat("cublasCreate: CUBLAS_STATUS_ALLOC_FAILED: ",
                                      cublasGetStatusString(CUBLAS_STATUS_ALLOC_FAILED)));
}

TEST(CudaError, OtherFailuresAreInternal) {
  const absl::Status s = CudaStatus(cudaErrorInvalidValue, "cudaMemcpy");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(),
            absl::StrCat("cudaMemcpy: cudaErrorInvalidValue: ", cudaGetErrorString(cudaErrorInvalidValue)));
  const absl::Status b = CublasStatus(CUBLAS_STATUS_INVALID_VALUE, "cublasSgemm");
  EXPECT_EQ(b.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(b.message(), absl::StrCat("cublasSgemm: CUBLAS_STATUS_INVALID_VALUE: ",
                                      cublasGetStatusString(CUBLAS_STATUS_INVALID_VALUE)));
}

TEST(CudaError, ThrowsTheStatus) {
  try {
    ThrowIfCuda(cudaErrorMemoryAllocation, "cudaMalloc");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CudaStatus(cudaErrorMemoryAllocation, "cudaMalloc"));
  }
  try {
    ThrowIfCublas(CUBLAS_STATUS_EXECUTION_FAILED, "cublasGemmEx");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), CublasStatus(CUBLAS_STATUS_EXECUTION_FAILED, "cublasGemmEx"));
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInternal);
  }
}

}  // namespace
}  // namespace kiln::cuda
