// The CUDA backend over the fake runtime (backends/cuda/fake), which bench/cuda_host_bench
// times: runs everywhere with --config=cuda, GPU or not, so neither rots. It checks that the
// fake really stands in for libcudart (its devices, its counters) and what each of the
// benchmark's ops asks of CUDA: one kernel per element-wise op and reduction, one GEMM per
// matmul, no synchronisation, no cudaMalloc once the allocator's cache is warm, and no device
// switch for ops on the thread's current device.
#include "backends/cuda/fake/fake_runtime.h"

#include <gtest/gtest.h>

#include <vector>

#include "absl/strings/match.h"
#include "autodiff/autodiff.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/dispatch/dispatch_backend.h"

namespace kiln {
namespace {

using T = Tensor<Cuda>;
using cuda::fake::Counts;
using cuda::fake::GetCounts;

// What `op` asked of the fake runtime, measured on its second call (the first fills the
// allocator's cache with the op's sizes).
template <class F>
Counts CountsOf(F&& op) {
  op();
  const Counts before = GetCounts();
  op();
  return GetCounts() - before;
}

// One kernel, nothing else: no GEMM, no wait, no allocation, no device switch.
void ExpectOneLaunch(const Counts& c, const char* kernel) {
  EXPECT_EQ(c.launches, 1);
  EXPECT_EQ(c.blas_calls, 0);
  EXPECT_EQ(c.syncs, 0);
  EXPECT_EQ(c.mallocs, 0);
  EXPECT_EQ(c.device_switches, 0);
  EXPECT_TRUE(absl::StrContains(cuda::fake::LastKernel(), kernel)) << cuda::fake::LastKernel();
}

TEST(FakeRuntime, StandsInForTheRealOne) {
  // Without a GPU, libcudart would report none; with one, it would not count launches.
  ASSERT_TRUE(cuda::Available().ok()) << cuda::Available();
  EXPECT_EQ(cuda::DeviceCount(), cuda::fake::kDevices);
  const Counts before = GetCounts();
  (void)T::zeros({8});
  EXPECT_EQ((GetCounts() - before).launches, 1);
  EXPECT_TRUE(absl::StrContains(cuda::fake::LastKernel(), "FillKernel")) << cuda::fake::LastKernel();
}

TEST(FakeRuntime, MemoryHoldsWhatIsCopiedIn) {
  const std::vector<double> values = {1, 2, 3, 4, 5};
  const T t = T::from_vector(std::vector<float>{1, 2, 3, 4, 5}, {5});
  EXPECT_EQ(t.to_data().ToDoubles(), values);
}

TEST(FakeRuntime, ElementwiseOpsLaunchOneKernelEach) {
  const T a = T::ones({1024}), b = T::ones({1024}), row = T::ones({32}), m = T::ones({32, 32});
  ExpectOneLaunch(CountsOf([&] { return a + b; }), "DenseBinaryKernel");
  ExpectOneLaunch(CountsOf([&] { return a * b; }), "DenseBinaryKernel");
  ExpectOneLaunch(CountsOf([&] { return m + row; }), "StridedBinaryKernel");
  ExpectOneLaunch(CountsOf([&] { return a.exp(); }), "DenseUnaryKernel");
  ExpectOneLaunch(CountsOf([&] { return a.relu(); }), "DenseUnaryKernel");
}

TEST(FakeRuntime, ReductionsAndMatmul) {
  const T a = T::ones({1024}), m = T::ones({32, 32});
  ExpectOneLaunch(CountsOf([&] { return a.sum(); }), "Reduce");
  ExpectOneLaunch(CountsOf([&] { return m.sum({1}); }), "Reduce");
  const Counts mm = CountsOf([&] { return m.matmul(m); });
  EXPECT_EQ(mm.launches, 0);
  EXPECT_EQ(mm.blas_calls, 1);
  EXPECT_EQ(mm.syncs, 0);
  EXPECT_EQ(mm.mallocs, 0);
}

TEST(FakeRuntime, AutodiffAndDispatchOpsLaunchOneKernel) {
  using A = Tensor<Autodiff<Cuda>>;
  const A a = A::ones({1024}).require_grad(), b = A::ones({1024}).require_grad();
  ExpectOneLaunch(CountsOf([&] { return a + b; }), "DenseBinaryKernel");
  using D = Tensor<Dispatch>;
  const DispatchDevice device = *DispatchDevice::Parse("cuda:0");
  const D x = D::ones({1024}, DType::kF32, device), y = D::ones({1024}, DType::kF32, device);
  ExpectOneLaunch(CountsOf([&] { return x + y; }), "DenseBinaryKernel");
}

TEST(FakeRuntime, DeviceSwitchesOnlyWhenTheDeviceChanges) {
  const T a = T::ones({256}, DType::kF32, CudaDevice(0));
  const T b = T::ones({256}, DType::kF32, CudaDevice(1));
  (void)(b + b);  // warm-up: cuda:1's cache has the result's size
  (void)(a + a);
  Counts before = GetCounts();
  (void)(b + b);  // from cuda:0 to cuda:1
  EXPECT_EQ((GetCounts() - before).device_switches, 1);
  before = GetCounts();
  (void)(b + b);
  (void)(b * b);
  EXPECT_EQ((GetCounts() - before).device_switches, 0);
}

TEST(FakeRuntime, IntegerDivisionWaitsForItsCheck) {
  // The documented exception to asynchrony: the zero-divisor flag is read back (one wait).
  const T a = T::ones({64}, DType::kI32), b = T::ones({64}, DType::kI32);
  const Counts c = CountsOf([&] { return a / b; });
  EXPECT_EQ(c.launches, 1);
  EXPECT_EQ(c.syncs, 1);
}

}  // namespace
}  // namespace kiln
