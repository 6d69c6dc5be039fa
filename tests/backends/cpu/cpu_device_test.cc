// Logical CPU devices: configuration, fair thread shares, parallel loops, and results that do
// not depend on how many threads a device has.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "backends/cpu/cpu_backend.h"

namespace kiln {
namespace {

TEST(CpuDevice, PrintsAndCompares) {
  EXPECT_EQ(CpuDevice(3).ToString(), "cpu:3");
  EXPECT_EQ(CpuDevice(), CpuDevice(0));
  EXPECT_NE(CpuDevice(1), CpuDevice(0));
}

TEST(CpuDevice, DefaultIsOneDeviceWithEveryCore) {
  ASSERT_TRUE(cpu::Configure({}).ok());
  EXPECT_EQ(cpu::DeviceCount(), 1);
  EXPECT_EQ(cpu::ThreadsOf(CpuDevice(0)), cpu::HardwareThreads());
  EXPECT_TRUE(cpu::CheckDevice(CpuDevice(0)).ok());
  EXPECT_EQ(cpu::CheckDevice(CpuDevice(1)).message(),
            "cpu:1 does not exist: this process has 1 logical CPU device (cpu:0..cpu:0); set "
            "KILN_CPU_DEVICES or call kiln::cpu::Configure for more");
}

TEST(CpuDevice, CoresAreSharedFairly) {
  ASSERT_TRUE(cpu::Configure({.devices = 4}).ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(cpu::ThreadsOf(CpuDevice(i)), std::max(1, cpu::HardwareThreads() / 4));
  }
  ASSERT_TRUE(cpu::Configure({.devices = 2, .threads_per_device = 3}).ok());
  EXPECT_EQ(cpu::ThreadsOf(CpuDevice(1)), 3);
  EXPECT_EQ(cpu::Configure({.devices = 0}).message(), "cpu::Configure: devices must be in 1..1024, got 0");
  EXPECT_EQ(cpu::Configure({.devices = 1, .threads_per_device = -1}).message(),
            "cpu::Configure: threads_per_device must be in 0..1024 (0 = fair share), got -1");
  // Each limit alone is not enough: together they must not make a million threads.
  EXPECT_EQ(cpu::Configure({.devices = 1024, .threads_per_device = 1024}).message(),
            "cpu::Configure: 1024 devices x 1024 threads each is 1048576 threads; at most 4096 in all");
  EXPECT_EQ(cpu::Configure({.devices = 8, .threads_per_device = 513}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cpu::CurrentConfig().threads_per_device, 3);  // a rejected call changes nothing
}

TEST(CpuDevice, ParallelForCoversEveryIndexOnce) {
  ASSERT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = 4}).ok());
  std::vector<std::atomic<int>> hits(100003);
  std::atomic<int> calls{0};
  cpu::ParallelFor(CpuDevice(0), hits.size(), 1000, [&](int64_t b, int64_t e) {
    ++calls;
    for (int64_t i = b; i < e; ++i) ++hits[i];
  });
  for (const auto& h : hits) ASSERT_EQ(h.load(), 1);
  EXPECT_EQ(calls.load(), 4);
  // Small ranges run inline in one call.
  calls = 0;
  cpu::ParallelFor(CpuDevice(0), 10, 1000, [&](int64_t b, int64_t e) {
    ++calls;
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 10);
  });
  EXPECT_EQ(calls.load(), 1);
}

// Element-wise ops and reductions combine partial results in a fixed order, so their bits do
// not depend on the thread count. Matmul splits rows by thread count, and Eigen's GEMM may round
// a row differently depending on where a block ends, so it is deterministic per thread count.
TEST(CpuDevice, ResultsDoNotDependOnThreadCount) {
  Generator gen(3);
  const TensorData x = RandomUniform({517, 1031}, DType::kF32, -1, 1, gen);
  const TensorData w = RandomUniform({1031, 67}, DType::kF32, -1, 1, gen);
  auto run = [&](int threads) {
    EXPECT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = threads}).ok());
    const CpuTensor a = CpuTensor::from_data(x);
    const CpuTensor b = CpuTensor::from_data(w);
    return std::vector<TensorData>{a.sum().to_data(), a.sum({0}).to_data(), a.max({1}).to_data(),
                                   (a.exp() * 2).to_data(), a.matmul(b).to_data()};
  };
  const auto one = run(1);
  const auto three = run(3);
  const auto again = run(3);
  for (size_t i = 0; i < one.size(); ++i) {
    if (i + 1 < one.size()) {
      EXPECT_EQ(one[i].ToDoubles(), three[i].ToDoubles()) << "result " << i;
    }
    EXPECT_EQ(three[i].ToDoubles(), again[i].ToDoubles()) << "result " << i;
  }
}

// The element-wise and fused kernels too: their chunks start on 16-element boundaries
// (ParallelForElements), so Eigen's vector and scalar paths (whose exp, erf and tanh differ in
// the last bits) take the same elements whatever the split; the attention's scratch starts on a
// cache line whichever thread's it is.
TEST(CpuDevice, FusedKernelsDoNotDependOnThreadCount) {
  Generator gen(4);
  const TensorData x = RandomUniform({517, 1031}, DType::kF32, -6, 6, gen);
  const TensorData qkv = RandomUniform({3, 130, 48}, DType::kF32, -2, 2, gen);
  const TensorData gy = RandomUniform({3, 130, 16}, DType::kF32, -1, 1, gen);
  auto run = [&](int threads) {
    EXPECT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = threads}).ok());
    const CpuTensor a = CpuTensor::from_data(x), q = CpuTensor::from_data(qkv);
    std::vector<TensorData> out;
    // Every element -6: its erf backward's scalar and vector exp differ, so any element a run's
    // scalar tail computes shows.
    const CpuTensor sixes = CpuTensor::full(a.shape(), -6.0);
    for (bool tanh : {false, true}) {
      out.push_back(CpuTensor(Cpu::gelu(a.primitive(), tanh)).to_data());
      out.push_back(CpuTensor(Cpu::gelu_backward(a.primitive(), (a * 0.5).primitive(), tanh)).to_data());
      out.push_back(CpuTensor(Cpu::gelu_backward(sixes.primitive(), sixes.primitive(), tanh)).to_data());
    }
    out.push_back((sixes * sixes * -0.5).exp().to_data());  // exp(-18): its scalar and vector paths differ
    const auto f = Cpu::causal_attention(q.primitive(), 2);
    out.push_back(CpuTensor(f.y).to_data());
    out.push_back(
        CpuTensor(Cpu::causal_attention_backward(q.primitive(), f.weights, CpuTensor::from_data(gy).primitive(), 2))
            .to_data());
    return out;
  };
  const auto one = run(1);
  for (int threads : {2, 3}) {
    const auto other = run(threads);
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_EQ(std::memcmp(one[i].raw(), other[i].raw(), one[i].nbytes()), 0)
          << "result " << i << " on " << threads << " threads";
    }
  }
  ASSERT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = 2}).ok());
}

TEST(CpuDevice, DevicesWorkFromTheirOwnThreads) {
  ASSERT_TRUE(cpu::Configure({.devices = 2}).ok());
  std::vector<double> sums(2);
  std::vector<std::thread> threads;
  for (int d = 0; d < 2; ++d) {
    threads.emplace_back([d, &sums] {
      const CpuDevice device(d);
      const CpuTensor x = CpuTensor::arange(0, 1000, 1, DType::kF64, device);
      const CpuTensor y = (x * (d + 1)).sum();
      EXPECT_EQ(y.device(), device);
      sums[d] = y.item<double>();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums[0], 499500);
  EXPECT_EQ(sums[1], 999000);
  // Moving between logical devices keeps the values (and, tensors being immutable, the memory).
  const CpuTensor a = CpuTensor::arange(4, DType::kI64, CpuDevice(0));
  const CpuTensor b = a.to(CpuDevice(1));
  EXPECT_EQ(b.device(), CpuDevice(1));
  EXPECT_EQ(b.to_data().ToDoubles(), a.to_data().ToDoubles());
}

}  // namespace
}  // namespace kiln
