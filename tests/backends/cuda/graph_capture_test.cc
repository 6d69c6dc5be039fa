// CapturedGraph over the fake CUDA runtime (backends/cuda/fake): what a capture records, what
// a launch replays, where the capture's buffers come from, and the exact errors of the ops a
// capture cannot hold. The fake counts kernels without running them, so these tests check
// counts and addresses; copies are real in the fake, inside graphs too.
#include "backends/cuda/graph.h"

#include <gtest/gtest.h>

#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/fake/fake_runtime.h"

namespace kiln::cuda {
namespace {

using T = Tensor<Cuda>;
using fake::Counts;
using fake::GetCounts;

const CudaDevice kDevice(0);

TEST(GraphCapture, RecordsInsteadOfLaunchingAndReplaysWithOneLaunch) {
  const T a = T::ones({1024}), b = T::ones({1024});
  std::optional<T> out;
  const Counts before = GetCounts();
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    out = (a + b).exp() * a;
    return absl::OkStatus();
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  const Counts captured = GetCounts() - before;
  EXPECT_EQ(captured.launches, 0);  // recorded, not run
  EXPECT_EQ(captured.graph_launches, 0);
  EXPECT_EQ((*graph)->pool_stats().allocations, 3);  // one block per temporary, from the pool

  const Counts replay_before = GetCounts();
  ASSERT_TRUE((*graph)->Launch().ok());
  const Counts replay = GetCounts() - replay_before;
  EXPECT_EQ(replay.launches, 0);
  EXPECT_EQ(replay.graph_launches, 1);
  EXPECT_EQ(replay.replayed_kernels, 3);
  EXPECT_EQ(replay.mallocs, 0);
  EXPECT_EQ(replay.syncs, 0);
}

TEST(GraphCapture, BuffersMadeDuringCaptureComeFromTheGraphsPool) {
  DeviceContext& c = Context(kDevice);
  const T a = T::ones({4096});
  (void)(a + a);  // the shared cache has a block of this size
  const CachingAllocator::Stats shared_before = c.memory->GetStats();
  std::optional<T> out;
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    out = a + a;
    return absl::OkStatus();
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((*graph)->pool_stats().allocations, 1);
  EXPECT_EQ((*graph)->pool_stats().in_use_bytes, 4096 * 4);
  const void* address = out->primitive().data();
  out.reset();
  // Freed after the capture: back to the graph's pool, not to eager work.
  EXPECT_EQ((*graph)->pool_stats().in_use_bytes, 0);
  const T eager = a + a;
  EXPECT_NE(eager.primitive().data(), address);
  EXPECT_GE(c.memory->GetStats().in_use_bytes, shared_before.in_use_bytes);
}

TEST(GraphCapture, APoolMissReachesCudaMallocWithoutBreakingTheCapture) {
  // A size nothing has used, so the shared cache has no block for it: cudaMalloc, which a
  // ThreadLocal capture forbids its thread unless the thread relaxes its mode for the call.
  const T a = T::ones({3 * 1000 * 1000 + 17});
  std::optional<T> out;
  const Counts before = GetCounts();
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    out = a.exp();
    return absl::OkStatus();
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ((GetCounts() - before).mallocs, 1);
}

TEST(GraphCapture, CopiesInsideTheGraphRunOnEveryLaunch) {
  const T src = T::from_vector(std::vector<float>{1, 2, 3, 4}, {4});
  const T dst = T::zeros({4});
  (void)dst.to_data();
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    WriteInto(src.primitive(), dst.primitive());
    return absl::OkStatus();
  });
  ASSERT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(dst.to_data().ToDoubles(), std::vector<double>({0, 0, 0, 0}));  // recorded only
  ASSERT_TRUE((*graph)->Launch().ok());
  EXPECT_EQ(dst.to_data().ToDoubles(), std::vector<double>({1, 2, 3, 4}));
}

// The error a body gets from `op`, run inside a capture.
absl::Status RefusalOf(const std::function<void()>& op) {
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    op();
    return absl::OkStatus();
  });
  EXPECT_FALSE(graph.ok());
  return graph.status();
}

void ExpectRefused(const absl::Status& s, const std::string& op) {
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), "cuda:0: " + op +
                             " waits for the device or the host, which a CUDA graph capture cannot hold (a capture "
                             "records work without running it, and a replay would skip the wait): leave it out of "
                             "the captured step")
      << s;
}

TEST(GraphCapture, OpsThatWaitAreRefusedNamingTheOp) {
  const T f = T::ones({16});
  const T i = T::ones({16}, DType::kI32);
  const T index = T::zeros({4}, DType::kI64);
  const T logits = T::ones({4, 3});
  const T targets = T::zeros({4}, DType::kI64);
  ExpectRefused(RefusalOf([&] { (void)f.sum().item<float>(); }), "to_data (a copy to the host, as item() makes)");
  ExpectRefused(RefusalOf([&] { (void)f.to_data(); }), "to_data (a copy to the host, as item() makes)");
  ExpectRefused(RefusalOf([&] { (void)(i / i); }), "div (the integer division-by-zero check)");
  ExpectRefused(RefusalOf([&] { (void)f.index_select(0, index); }), "index_select (the index range check)");
  ExpectRefused(RefusalOf([&] { (void)Cuda::cross_entropy_rows(logits.primitive(), targets.primitive(), -100, 0); }),
                "cross_entropy (the target range check)");
  ExpectRefused(RefusalOf([&] {
                  (void)T::from_vector(std::vector<float>{1, 2}, {2});
                }),
                "from_data (a copy from the host)");
  ExpectRefused(RefusalOf([&] { Synchronize(kDevice); }), "Synchronize");
  ExpectRefused(RefusalOf([&] { (void)f.to(CudaDevice(1)); }), "to_device (a copy between GPUs, which waits for it)");
  // The device is usable again afterwards, eagerly.
  EXPECT_NO_THROW((void)(i / i).to_data());
  EXPECT_FALSE(Context(kDevice).capturing.load());
}

TEST(GraphCapture, AnotherThreadMayNotUseTheDeviceDuringCapture) {
  const T a = T::ones({64});
  absl::Status other;
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    std::thread t([&] {
      try {
        (void)(a + a);
      } catch (const Error& e) {
        other = e.status();
      }
    });
    t.join();
    return absl::OkStatus();
  });
  EXPECT_TRUE(graph.ok()) << graph.status();
  EXPECT_EQ(other.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(other.message(), "cuda:0 is being captured into a CUDA graph by another thread"))
      << other;
}

TEST(GraphCapture, AWaitBehindKilnsBackBreaksTheCaptureAndSaysSo) {
  DeviceContext& c = Context(kDevice);
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    cudaStreamSynchronize(c.stream);  // the runtime's own refusal, as in the real one
    return absl::OkStatus();
  });
  ASSERT_FALSE(graph.ok());
  EXPECT_TRUE(
      absl::StrContains(graph.status().message(), "cudaStreamEndCapture (a call in the captured work broke it)"))
      << graph.status();
}

TEST(GraphCapture, NestedCaptureIsRefused) {
  absl::Status inner;
  auto graph = CapturedGraph::Capture(kDevice, [&] {
    inner = CapturedGraph::Capture(kDevice, [] { return absl::OkStatus(); }).status();
    return absl::OkStatus();
  });
  EXPECT_TRUE(graph.ok());
  EXPECT_EQ(inner.message(), "cuda:0 is already being captured into a CUDA graph");
}

}  // namespace
}  // namespace kiln::cuda
