// The AVX-512 GEMM kernel: Eigen built with -mavx512{f,dq,vl,bw} (BUILD.bazel). Eigen's inline
// functions and templates would otherwise exist twice under the same names, once per ISA, and
// the linker would keep either copy for both; renaming its namespace in this file keeps the
// AVX-512 copy apart, so nothing outside gemm.cc's CPUID check ever runs it.
#define Eigen kiln_eigen_avx512
#define GEMM_KERNEL_NAMESPACE avx512
#include "backends/cpu/gemm_block.inc"
