#include <algorithm>
#include <cstring>
#include <type_traits>

#include "backends/cpu/collective_kernels.h"
#include "backends/cpu/half_convert.h"
#include "backends/cpu/strided.h"

namespace kiln {

namespace {

// out = f over the inputs in member order, then last(out) in the same pass as the last input
// (a mean's division: one pass over the output fewer; each value is rounded as in two passes).
template <class T, class F, class Last>
void Fold(const std::vector<const void*>& inputs, T* out, int64_t begin, int64_t end, F f, Last last) {
  const T* a = static_cast<const T*>(inputs[0]);
  if (inputs.size() == 1) {
    for (int64_t i = begin; i < end; ++i) out[i] = last(a[i]);
    return;
  }
  const T* b = static_cast<const T*>(inputs[1]);
  if (inputs.size() == 2) {
    for (int64_t i = begin; i < end; ++i) out[i] = last(f(a[i], b[i]));
    return;
  }
  for (int64_t i = begin; i < end; ++i) out[i] = f(a[i], b[i]);
  for (size_t m = 2; m + 1 < inputs.size(); ++m) {
    const T* c = static_cast<const T*>(inputs[m]);
    for (int64_t i = begin; i < end; ++i) out[i] = f(out[i], c[i]);
  }
  const T* z = static_cast<const T*>(inputs.back());
  for (int64_t i = begin; i < end; ++i) out[i] = last(f(out[i], z[i]));
}
template <class T, class F>
void Fold(const std::vector<const void*>& inputs, T* out, int64_t begin, int64_t end, F f) {
  Fold<T>(inputs, out, begin, end, f, [](T x) { return x; });
}

template <class T>
void ReduceTyped(ReduceOp kind, const std::vector<const void*>& inputs, T* out, int64_t begin, int64_t end) {
  switch (kind) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: {
      const auto add = [](T x, T y) {
        if constexpr (std::is_integral_v<T>) {
          using U = std::make_unsigned_t<T>;
          return static_cast<T>(U(x) + U(y));
        } else {
          return x + y;
        }
      };
      if (kind == ReduceOp::kSum) {
        Fold<T>(inputs, out, begin, end, add);
      } else {
        const T n = static_cast<T>(inputs.size());
        Fold<T>(inputs, out, begin, end, add, [n](T x) { return static_cast<T>(x / n); });
      }
      return;
    }
    case ReduceOp::kMax: Fold<T>(inputs, out, begin, end, [](T x, T y) { return x != x || x > y ? x : y; }); return;
    case ReduceOp::kMin: Fold<T>(inputs, out, begin, end, [](T x, T y) { return x != x || x < y ? x : y; }); return;
  }
}

// Half types: every member's value widened to f32, combined in member order, rounded once; block
// by block through f32 buffers that stay in L1, so the conversions run in bulk
// (backends/cpu/half_convert.h).
constexpr int64_t kHalfBlock = 512;

template <class H>
void ReduceHalf(ReduceOp kind, const std::vector<const void*>& inputs, H* out, int64_t begin, int64_t end) {
  const float n = static_cast<float>(inputs.size());
  alignas(64) float acc[kHalfBlock], x[kHalfBlock];
  for (int64_t i = begin; i < end; i += kHalfBlock) {
    const int64_t len = std::min(kHalfBlock, end - i);
    cpu::HalfToFloat(static_cast<const H*>(inputs[0]) + i, 1, acc, len);
    for (size_t m = 1; m < inputs.size(); ++m) {
      cpu::HalfToFloat(static_cast<const H*>(inputs[m]) + i, 1, x, len);
      for (int64_t j = 0; j < len; ++j) {
        switch (kind) {
          case ReduceOp::kSum:
          case ReduceOp::kMean: acc[j] += x[j]; break;
          case ReduceOp::kMax: acc[j] = acc[j] != acc[j] || acc[j] > x[j] ? acc[j] : x[j]; break;
          case ReduceOp::kMin: acc[j] = acc[j] != acc[j] || acc[j] < x[j] ? acc[j] : x[j]; break;
        }
      }
    }
    if (kind == ReduceOp::kMean) {
      for (int64_t j = 0; j < len; ++j) acc[j] /= n;
    }
    cpu::FloatToHalf(acc, 1, out + i, len);
  }
}

template <class H>
void DivideHalf(H* p, int64_t begin, int64_t end, int64_t by) {
  const float n = static_cast<float>(by);
  alignas(64) float x[kHalfBlock];
  for (int64_t i = begin; i < end; i += kHalfBlock) {
    const int64_t len = std::min(kHalfBlock, end - i);
    cpu::HalfToFloat(p + i, 1, x, len);
    for (int64_t j = 0; j < len; ++j) x[j] /= n;
    cpu::FloatToHalf(x, 1, p + i, len);
  }
}

}  // namespace

void ReduceOnHost(ReduceOp kind, DType dtype, const std::vector<const void*>& inputs, void* out, int64_t begin,
                  int64_t end) {
  VisitDType(dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (kIsHalf<T>) {
      ReduceHalf<T>(kind, inputs, static_cast<T*>(out), begin, end);
    } else if constexpr (!std::is_same_v<T, bool>) {
      ReduceTyped<T>(kind, inputs, static_cast<T*>(out), begin, end);
    }
  });
}

void DivideOnHost(DType dtype, void* data, int64_t begin, int64_t end, int64_t by) {
  VisitDType(dtype, [&](auto v) {
    using T = decltype(v);
    T* p = static_cast<T*>(data);
    if constexpr (kIsHalf<T>) {
      DivideHalf(p, begin, end, by);
    } else if constexpr (!std::is_same_v<T, bool>) {
      const T n = static_cast<T>(by);
      for (int64_t i = begin; i < end; ++i) p[i] = p[i] / n;
    }
  });
}

void CollectiveKernels<Cpu>::Divide(DType dtype, void* data, int64_t count, int64_t by, const CpuDevice& device) {
  cpu::ParallelFor(device, count, cpu::kElementwiseGrain,
                   [&](int64_t lo, int64_t hi) { DivideOnHost(dtype, data, lo, hi, by); });
}

void CollectiveKernels<Cpu>::Reduce(ReduceOp kind, DType dtype, const std::vector<const void*>& inputs, void* out,
                                    int64_t begin, int64_t end, const CpuDevice& device) {
  cpu::ParallelFor(device, end - begin, cpu::kElementwiseGrain,
                   [&](int64_t lo, int64_t hi) { ReduceOnHost(kind, dtype, inputs, out, begin + lo, begin + hi); });
}

void CollectiveKernels<Cpu>::CopyInto(DType dtype, const void* from, void* to, int64_t at, int64_t count) {
  const int64_t es = DTypeSize(dtype);
  if (count > 0) std::memcpy(static_cast<std::byte*>(to) + at * es, from, count * es);
}

}  // namespace kiln
