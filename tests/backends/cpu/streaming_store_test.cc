// Streamed writes (backends/cpu/streaming_store.h) give exactly what the plain loop gives, for
// every element size, alignment and length around the block size; and an element-wise op
// large enough to take that path is exact on 1, 2 and 3 threads.
#include "backends/cpu/streaming_store.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"

namespace kiln {
namespace {

template <class T>
void CheckEveryOffsetAndLength() {
  for (int64_t offset = 0; offset < 9; ++offset) {
    for (int64_t n : {0, 1, 7, 1023, 1024, 1025, 3000, 5001}) {
      std::vector<T> out(offset + n + 1, T(0));
      const auto value = [](int64_t i) { return static_cast<T>((i * 37 + 11) % 101); };
      cpu::WriteStreaming(out.data() + offset, n, [&](T* dst, int64_t at, int64_t count) {
        for (int64_t i = 0; i < count; ++i) dst[i] = value(at + i);
      });
      for (int64_t i = 0; i < offset; ++i) ASSERT_EQ(out[i], T(0));
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[offset + i], value(i)) << "offset " << offset << " n " << n;
      ASSERT_EQ(out[offset + n], T(0)) << "wrote past the end";
    }
  }
}

TEST(StreamingStore, MatchesThePlainLoop) {
  CheckEveryOffsetAndLength<uint8_t>();
  CheckEveryOffsetAndLength<int16_t>();
  CheckEveryOffsetAndLength<float>();
  CheckEveryOffsetAndLength<double>();
}

TEST(StreamingStore, LargeElementwiseOpsAreExactOnAnyThreadCount) {
  // 4,194,311 floats: 16 MiB and a bit, so the output is streamed; not a multiple of anything.
  const int64_t n = (int64_t{1} << 22) + 7;
  std::vector<float> a(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    a[i] = static_cast<float>(i % 1000) * 0.25f;
    b[i] = static_cast<float>(i % 777) - 300.0f;
  }
  const Tensor<Cpu> ta = Tensor<Cpu>::from_vector(a, {n}), tb = Tensor<Cpu>::from_vector(b, {n});
  for (int threads : {1, 2, 3}) {
    ASSERT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = threads}).ok());
    const TensorData sum = (ta + tb).to_data(), scaled = (ta * 3.0f).to_data();
    const auto s = sum.values<float>(), m = scaled.values<float>();
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(s[i], a[i] + b[i]) << threads << " threads, element " << i;
      ASSERT_EQ(m[i], a[i] * 3.0f) << threads << " threads, element " << i;
    }
  }
}

}  // namespace
}  // namespace kiln
