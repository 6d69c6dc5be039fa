// CUDA devices: naming, and what a user sees when there is no GPU (runs everywhere with
// --config=cuda), and the backend's own behaviour on a GPU (skipped without one): stream
// order across ops, the allocator reusing memory, copies between devices.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/dispatch/dispatch_backend.h"
#include "tests/backends.h"

namespace kiln {
namespace {

TEST(CudaDevice, Names) {
  EXPECT_EQ(CudaDevice().ToString(), "cuda:0");
  EXPECT_EQ(CudaDevice(3).ToString(), "cuda:3");
  EXPECT_EQ(CudaDevice(1), CudaDevice(1));
  EXPECT_NE(CudaDevice(0), CudaDevice(1));
  EXPECT_EQ(Cuda::Name(), std::string("cuda"));
}

TEST(CudaDevice, NoGpuIsAClearError) {
  if (cuda::Available().ok()) GTEST_SKIP() << "this machine has a GPU; nothing to check";
  EXPECT_EQ(cuda::DeviceCount(), 0);
  const absl::Status available = cuda::Available();
  EXPECT_EQ(available.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(available.message(), "no CUDA device is available (cudaGetDeviceCount")) << available;
  const absl::Status s = cuda::CheckDevice(CudaDevice(0));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "cuda:0 does not exist: " + std::string(available.message()));
  // Tensor math throws kiln::Error with the same message; nothing aborts.
  try {
    (void)Tensor<Cuda>::zeros({2, 3});
    ADD_FAILURE() << "no error without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(e.status().message(), s.message());
  }
  // A parsed device string (parsing is syntax only) reports it when asked.
  EXPECT_EQ(DispatchDevice::Parse("cuda:0")->Check(), s);
  EXPECT_EQ(DispatchDevice::Parse("autodiff(cuda:1)")->Check().message(),
            "cuda:1 does not exist: " + std::string(available.message()));
}

TEST(CudaDevice, MissingIndexNamesTheDevicesThatExist) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  const int count = cuda::DeviceCount();
  const absl::Status s = cuda::CheckDevice(CudaDevice(count));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "CUDA device")) << s;
  EXPECT_TRUE(cuda::CheckDevice(CudaDevice(count - 1)).ok());
}

TEST(CudaBackend, AllocatorReusesMemoryAcrossSteps) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  using T = Tensor<Cuda>;
  const T x = T::ones({256, 256});
  (void)(x + x).sum().item<float>();  // warm-up: the sizes of one step are now cached
  const auto before = cuda::Context(CudaDevice(0)).memory->GetStats();
  for (int step = 0; step < 10; ++step) EXPECT_EQ((x + x).sum().item<float>(), 2 * 256 * 256);
  const auto after = cuda::Context(CudaDevice(0)).memory->GetStats();
  EXPECT_EQ(after.misses, before.misses) << "cudaMalloc was called after warm-up";
  EXPECT_GT(after.hits, before.hits);
}

TEST(CudaBackend, LongChainsRunInStreamOrder) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  using T = Tensor<Cuda>;
  // Each step frees the previous tensor while its kernels may still be queued: stream order
  // makes the reuse safe.
  T x = T::zeros({1 << 20});
  for (int i = 0; i < 100; ++i) x = x + 1;
  EXPECT_EQ(x.sum().item<double>(), 100.0 * (1 << 20));
}

TEST(CudaBackend, LargeAndLongReductions) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  using T = Tensor<Cuda>;
  // Long rows (two passes), a long column reduction, and more rows than one grid dimension.
  const T row = T::ones({1, 5'000'000}, DType::kF64);
  EXPECT_EQ(row.sum({1}).item<double>(), 5'000'000);
  const T column = T::ones({3'000'000, 2}, DType::kI64);
  EXPECT_EQ(column.sum({0}).to_data().ToDoubles(), (std::vector<double>{3'000'000, 3'000'000}));
  const T rows = T::ones({200'000, 3}, DType::kI32);
  EXPECT_EQ(rows.sum({1}).sum().item<int64_t>(), 600'000);
  const T big = T::arange(0, 3'000'000, 1, DType::kF32);
  EXPECT_EQ(big.argmax(0).item<int64_t>(), 2'999'999);
  EXPECT_EQ(big.max().item<float>(), 2'999'999.0f);
}

TEST(CudaBackend, CopiesBetweenDevices) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  if (cuda::DeviceCount() < 2) GTEST_SKIP() << "needs two CUDA devices";
  using T = Tensor<Cuda>;
  const T x = T::arange(0, 10, 1, DType::kF32).reshape({2, 5}).transpose(0, 1);
  const T y = x.to(CudaDevice(1));
  EXPECT_EQ(y.device(), CudaDevice(1));
  EXPECT_EQ(y.to_data().ToDoubles(), x.to_data().ToDoubles());
}

TEST(CudaBackend, DispatchRunsOnCuda) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  using D = Tensor<Dispatch>;
  const DispatchDevice device = DispatchDevice::Parse("cuda:0").value();
  const D x = D::arange(0, 4, 1, DType::kF32, device);
  EXPECT_EQ(x.Describe(), "f32[4] on cuda:0");
  EXPECT_EQ((x * 2).sum().item<double>(), 12);
  EXPECT_EQ(x.to(DispatchDevice(CpuDevice(0))).to_data().ToDoubles(), (std::vector<double>{0, 1, 2, 3}));
}

}  // namespace
}  // namespace kiln
