// The baseline GEMM kernel: Eigen built with the build's flags (AVX2 + FMA).
#define GEMM_KERNEL_NAMESPACE avx2
#include "backends/cpu/gemm_block.inc"
