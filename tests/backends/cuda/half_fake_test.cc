// bf16 and f16 on the CUDA backend over the fake runtime (no GPU needed): what each half op
// asks of CUDA. A native half op is one kernel on the half operands (no widening copies to f32
// and back), a cast is one kernel, and a half matmul is one GemmEx on 16-bit operands that
// accumulates in f32. Values are checked on a GPU by the conformance suite and
// half_cast_gpu_test; the fake runs no kernels.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/fake/fake_runtime.h"

namespace kiln {
namespace {

using T = Tensor<Cuda>;
using cuda::fake::Counts;
using cuda::fake::GetCounts;

// What `op` asked of the fake, on its second call (the first warms the allocator's cache).
template <class F>
Counts CountsOf(F&& op) {
  op();
  const Counts before = GetCounts();
  op();
  return GetCounts() - before;
}

// The mangled name of a kernel instantiated for the half type of `dtype`.
const char* HalfTypeName(DType dtype) { return dtype == DType::kBF16 ? "__nv_bfloat16" : "6__half"; }

class HalfFake : public ::testing::TestWithParam<DType> {};

TEST_P(HalfFake, EmptyTensorsAreAllowed) {
  const T t = T::zeros({3, 4}, GetParam());
  EXPECT_EQ(t.dtype(), GetParam());
  EXPECT_EQ(t.to_data().nbytes(), 3 * 4 * 2);
}

TEST_P(HalfFake, AddIsOneKernelOnTheHalves) {
  const T a = T::zeros({1024}, GetParam()), b = T::zeros({1024}, GetParam());
  const Counts c = CountsOf([&] { (void)(a + b); });
  EXPECT_EQ(c.launches, 1);
  EXPECT_EQ(c.blas_calls, 0);
  EXPECT_EQ(c.syncs, 0);
  const std::string kernel = cuda::fake::LastKernel();
  EXPECT_TRUE(absl::StrContains(kernel, "BinaryKernel")) << kernel;
  EXPECT_TRUE(absl::StrContains(kernel, HalfTypeName(GetParam()))) << kernel;
}

TEST_P(HalfFake, UnaryAndWhereAreOneKernel) {
  const T a = T::zeros({256}, GetParam());
  EXPECT_EQ(CountsOf([&] { (void)a.exp(); }).launches, 1);
  EXPECT_TRUE(absl::StrContains(cuda::fake::LastKernel(), HalfTypeName(GetParam()))) << cuda::fake::LastKernel();
  const T cond = T::zeros({256}, DType::kBool);
  EXPECT_EQ(CountsOf([&] { (void)T::where(cond, a, a); }).launches, 1);
}

TEST_P(HalfFake, CastIsOneKernel) {
  const T a = T::zeros({1024}, DType::kF32);
  const T h = a.to(GetParam());
  for (DType to : {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool, DType::kBF16, DType::kF16}) {
    if (to == GetParam()) continue;
    const Counts c = CountsOf([&] { (void)h.to(to); });
    EXPECT_EQ(c.launches, 1) << DTypeName(to);
    EXPECT_TRUE(absl::StrContains(cuda::fake::LastKernel(), "ConvertFn")) << cuda::fake::LastKernel();
  }
  EXPECT_EQ(CountsOf([&] { (void)a.to(GetParam()); }).launches, 1);
}

TEST_P(HalfFake, SumReadsTheHalvesAndRoundsOnce) {
  const T a = T::zeros({64, 64}, GetParam());
  // One reduction kernel over the halves (into f32), one cast of the 64 results.
  const Counts c = CountsOf([&] { (void)a.sum({1}); });
  EXPECT_EQ(c.launches, 2);
  EXPECT_EQ(a.sum({1}).dtype(), GetParam());
}

TEST_P(HalfFake, MatmulIsOneGemmExAccumulatingInF32) {
  const T a = T::zeros({32, 48}, GetParam()), b = T::zeros({48, 16}, GetParam());
  const Counts c = CountsOf([&] { (void)a.matmul(b); });
  EXPECT_EQ(c.blas_calls, 1);
  EXPECT_EQ(c.launches, 0);  // no widening cast of either operand or of the result
  const cuda::fake::GemmCall g = cuda::fake::LastGemm();
  const cudaDataType want = GetParam() == DType::kBF16 ? CUDA_R_16BF : CUDA_R_16F;
  EXPECT_EQ(g.a_type, want);
  EXPECT_EQ(g.b_type, want);
  EXPECT_EQ(g.c_type, want);
  EXPECT_EQ(g.compute, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(g.m, 16);  // column-major C^T = B^T A^T
  EXPECT_EQ(g.n, 32);
  EXPECT_EQ(g.k, 48);
  EXPECT_EQ(a.matmul(b).dtype(), GetParam());
}

TEST(HalfFakeF32, MatmulStaysPlainF32) {
  const T a = T::zeros({8, 8}), b = T::zeros({8, 8});
  (void)a.matmul(b);
  const cuda::fake::GemmCall g = cuda::fake::LastGemm();
  EXPECT_EQ(g.a_type, CUDA_R_32F);
  EXPECT_EQ(g.compute, CUBLAS_COMPUTE_32F);  // not a TF32 compute type
}

TEST_P(HalfFake, SoftmaxWidensToF32) {
  const T a = T::zeros({4, 8}, GetParam());
  // Cast up, the f32 kernel, cast down: HalfInF32 (the fused kernels are f32 and f64 only).
  const T y = T(Cuda::softmax_last(a.primitive(), false, false));
  EXPECT_EQ(y.dtype(), GetParam());
  EXPECT_EQ(CountsOf([&] { (void)Cuda::softmax_last(a.primitive(), false, false); }).launches, 3);
}

INSTANTIATE_TEST_SUITE_P(Halves, HalfFake, ::testing::Values(DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(DTypeName(info.param)); });

}  // namespace
}  // namespace kiln
