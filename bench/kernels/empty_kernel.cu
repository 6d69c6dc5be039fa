// The bare launch (empty_kernel.h): same signature shape as kiln's element-wise launches
// (a pointer, a count, a stream), so the floor it measures is like for like.
#include "bench/kernels/empty_kernel.h"

namespace kiln::bench {
namespace {

__global__ void EmptyKernel(float* out, long long n) {
  if (n < 0) out[0] = 0;  // never true: keeps the arguments alive
}

}  // namespace

cudaError_t LaunchEmptyKernel(float* out, long long n, cudaStream_t stream) {
  EmptyKernel<<<1, 256, 0, stream>>>(out, n);
  return cudaGetLastError();
}

}  // namespace kiln::bench
