// One launch of a kernel that does nothing, on `stream`: the bare cost of `<<<>>>` plus the
// error check, which is the floor for any op that launches one kernel.
#ifndef KILN_BENCH_KERNELS_EMPTY_KERNEL_H_
#define KILN_BENCH_KERNELS_EMPTY_KERNEL_H_

#include <cuda_runtime_api.h>

namespace kiln::bench {

cudaError_t LaunchEmptyKernel(float* out, long long n, cudaStream_t stream);

}  // namespace kiln::bench

#endif  // KILN_BENCH_KERNELS_EMPTY_KERNEL_H_
