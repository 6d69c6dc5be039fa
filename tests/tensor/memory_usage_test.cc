// Each backend's per-device memory counts (B::memory_usage, B::reset_peak_memory): a tensor of
// k bytes raises the current bytes by exactly k (what it asked for, whatever the allocator
// rounds to or caches), a freed one lowers them and leaves the peak, devices count apart, and
// Autodiff and Dispatch report their backend's counts.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <type_traits>
#include <vector>

#include "tensor/memory_usage.h"
#include "tests/backends.h"

namespace kiln::testing {
namespace {

template <class B>
class MemoryUsageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, 2);
    devices_ = TestDevices<B>::Provide(2);
    for (const auto& d : devices_) B::reset_peak_memory(d);
  }
  MemoryUsage Usage(int i) const { return B::memory_usage(devices_[i]); }
  std::vector<typename B::Device> devices_;
};
TYPED_TEST_SUITE(MemoryUsageTest, DistributedBackends, ConfigNames);

TYPED_TEST(MemoryUsageTest, ATensorRaisesCurrentAndPeakByItsBytes) {
  using B = TypeParam;
  const MemoryUsage before = this->Usage(0);
  EXPECT_EQ(before.peak_bytes, before.current_bytes);  // reset in SetUp
  const auto d = this->devices_[0];
  const Tensor<B> a = Tensor<B>::zeros({1000}, DType::kF32, d);
  EXPECT_EQ(this->Usage(0), (MemoryUsage{before.current_bytes + 4000, before.current_bytes + 4000}));
  const Tensor<B> b = Tensor<B>::arange(15, DType::kI64, d).reshape({3, 5});  // a view: no copy
  const Tensor<B> c = Tensor<B>::ones({7}, DType::kBF16, d);
  const int64_t held = 4000 + 15 * 8 + 7 * 2;
  EXPECT_EQ(this->Usage(0), (MemoryUsage{before.current_bytes + held, before.current_bytes + held}));
  // Views and copies of a tensor share its buffer.
  const Tensor<B> views[] = {a, a.reshape({10, 100}).transpose(0, 1), a.slice(0, 10, 20)};
  EXPECT_EQ(this->Usage(0).current_bytes, before.current_bytes + held);
}

TYPED_TEST(MemoryUsageTest, FreeingLowersCurrentAndLeavesThePeak) {
  using B = TypeParam;
  const MemoryUsage before = this->Usage(0);
  {
    const Tensor<B> a = Tensor<B>::zeros({256, 64}, DType::kF32, this->devices_[0]);
    const Tensor<B> b = Tensor<B>::zeros({100}, DType::kF32, this->devices_[0]);
  }
  const int64_t peak = before.current_bytes + 256 * 64 * 4 + 400;
  EXPECT_EQ(this->Usage(0), (MemoryUsage{before.current_bytes, peak}));
  // A smaller tensor made after them (the allocator may reuse their memory) leaves the peak.
  const Tensor<B> c = Tensor<B>::zeros({10}, DType::kF32, this->devices_[0]);
  EXPECT_EQ(this->Usage(0), (MemoryUsage{before.current_bytes + 40, peak}));
}

TYPED_TEST(MemoryUsageTest, ResetPeakRestartsFromTheCurrentBytes) {
  using B = TypeParam;
  const auto d = this->devices_[0];
  const MemoryUsage before = this->Usage(0);
  const Tensor<B> kept = Tensor<B>::zeros({50}, DType::kF32, d);
  { const Tensor<B> big = Tensor<B>::zeros({5000}, DType::kF32, d); }
  EXPECT_EQ(this->Usage(0).peak_bytes, before.current_bytes + 200 + 20000);
  B::reset_peak_memory(d);
  EXPECT_EQ(this->Usage(0), (MemoryUsage{before.current_bytes + 200, before.current_bytes + 200}));
  { const Tensor<B> small = Tensor<B>::zeros({25}, DType::kF32, d); }
  EXPECT_EQ(this->Usage(0), (MemoryUsage{before.current_bytes + 200, before.current_bytes + 300}));
}

TYPED_TEST(MemoryUsageTest, DevicesCountApart) {
  using B = TypeParam;
  const MemoryUsage first = this->Usage(0), second = this->Usage(1);
  {
    const Tensor<B> on_second = Tensor<B>::zeros({300}, DType::kF32, this->devices_[1]);
    EXPECT_EQ(this->Usage(0), first);
    EXPECT_EQ(this->Usage(1), (MemoryUsage{second.current_bytes + 1200, second.current_bytes + 1200}));
    B::reset_peak_memory(this->devices_[0]);  // another device's reset leaves this one's peak
    EXPECT_EQ(this->Usage(1).peak_bytes, second.current_bytes + 1200);
  }
  EXPECT_EQ(this->Usage(0), first);
  EXPECT_EQ(this->Usage(1), (MemoryUsage{second.current_bytes, second.current_bytes + 1200}));
  // A tensor moved to the first device: its copy counts there. The CPU's logical devices share
  // host memory, so its move shares the buffer, which stays counted where it was made.
  const Tensor<B> moved = Tensor<B>::zeros({10}, DType::kF32, this->devices_[1]).to(this->devices_[0]);
  const bool shared = std::is_same_v<B, Cpu>;
  EXPECT_EQ(this->Usage(0).current_bytes, first.current_bytes + (shared ? 0 : 40));
  EXPECT_EQ(this->Usage(1).current_bytes, second.current_bytes + (shared ? 40 : 0));
}

TYPED_TEST(MemoryUsageTest, AutodiffAndDispatchReportTheirBackendsCounts) {
  using B = TypeParam;
  const auto d = this->devices_[0];
  const DispatchDevice plain(d), wrapped = DispatchDevice::Autodiff(plain);
  const Tensor<Autodiff<B>> x = Tensor<Autodiff<B>>::zeros({64}, DType::kF32, d);
  const Tensor<Dispatch> y = Tensor<Dispatch>::zeros({32}, DType::kF32, plain);
  const MemoryUsage usage = B::memory_usage(d);
  EXPECT_EQ(Autodiff<B>::memory_usage(d), usage);
  EXPECT_EQ(Dispatch::memory_usage(plain), usage);
  EXPECT_EQ(Dispatch::memory_usage(wrapped), usage);
  { const Tensor<B> z = Tensor<B>::zeros({1000}, DType::kF32, d); }
  Dispatch::reset_peak_memory(wrapped);
  EXPECT_EQ(B::memory_usage(d), (MemoryUsage{usage.current_bytes, usage.current_bytes}));
  { const Tensor<B> z = Tensor<B>::zeros({1000}, DType::kF32, d); }
  Autodiff<B>::reset_peak_memory(d);
  EXPECT_EQ(B::memory_usage(d).peak_bytes, usage.current_bytes);
}

TYPED_TEST(MemoryUsageTest, AMissingDeviceIsAnError) {
  using B = TypeParam;
  try {
    B::memory_usage(TestDevices<B>::Missing());
    FAIL() << "no error for a missing device";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), TestDevices<B>::MissingMessage());
  }
  EXPECT_THROW(B::reset_peak_memory(TestDevices<B>::Missing()), Error);
}

// Threads allocating and freeing on one device at once: every byte comes back, and the peak
// is at least what one thread held and at most what all of them could.
TYPED_TEST(MemoryUsageTest, ConcurrentTensorsBalance) {
  using B = TypeParam;
  const auto d = this->devices_[0];
  const MemoryUsage before = this->Usage(0);
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) const Tensor<B> x = Tensor<B>::zeros({256}, DType::kF32, d);
    });
  }
  for (std::thread& t : threads) t.join();
  const MemoryUsage after = this->Usage(0);
  EXPECT_EQ(after.current_bytes, before.current_bytes);
  EXPECT_GE(after.peak_bytes, before.current_bytes + 1024);
  EXPECT_LE(after.peak_bytes, before.current_bytes + kThreads * 1024);
}

// The counter itself under contention, with another thread resetting the peak: no update is
// lost, and the bytes are never seen below zero.
TEST(MemoryCounter, ConcurrentUpdatesAndResets) {
  MemoryCounter counter;
  std::atomic<bool> done{false};
  std::atomic<int64_t> bad_snapshots{0};
  std::thread reader([&] {
    while (!done.load()) {
      const MemoryUsage u = counter.usage();
      if (u.current_bytes < 0 || u.current_bytes > 32) ++bad_snapshots;
      counter.ResetPeak();
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < 20000; ++i) {
        counter.Allocated(8);
        counter.Freed(8);
      }
    });
  }
  for (std::thread& t : writers) t.join();
  done = true;
  reader.join();
  EXPECT_EQ(bad_snapshots.load(), 0);
  EXPECT_EQ(counter.usage().current_bytes, 0);
  EXPECT_LE(counter.usage().peak_bytes, 32);
  counter.ResetPeak();
  EXPECT_EQ(counter.usage(), (MemoryUsage{0, 0}));
  counter.Allocated(100);
  counter.Allocated(28);
  counter.Freed(100);
  EXPECT_EQ(counter.usage(), (MemoryUsage{28, 128}));
}

}  // namespace
}  // namespace kiln::testing
