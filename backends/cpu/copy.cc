// Strided copies and dtype conversions.
#include <cmath>
#include <type_traits>

#include "backends/cpu/half_convert.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "tensor/scalar.h"

namespace kiln::cpu {
namespace {

template <class To, class From>
To Convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;  // bit for bit: a half's signalling NaN stays as it is, as on CUDA
  } else if constexpr (kIsHalf<To>) {
    return ToHalf<To>(x);
  } else if constexpr (kIsHalf<From>) {
    return Convert<To>(static_cast<float>(x));
  } else if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return Scalar::FloatToInt<To>(x);  // saturating, NaN -> 0: a plain cast would be UB
  } else {
    return static_cast<To>(x);
  }
}

// n elements `stride` apart converted into a contiguous run. f32 <-> bf16/f16 goes through the
// bulk conversions (backends/cpu/half_convert.h), bit for bit the same as Convert.
template <class To, class From>
void ConvertRun(const From* in, int64_t stride, To* out, int64_t n) {
  if constexpr (std::is_same_v<From, float> && kIsHalf<To>) {
    FloatToHalf(in, stride, out, n);
  } else if constexpr (kIsHalf<From> && std::is_same_v<To, float>) {
    HalfToFloat(in, stride, out, n);
  } else if (stride == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = Convert<To>(in[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = Convert<To>(in[i * stride]);
  }
}

// A column-major [rows, cols] source (a transposed view) copied into row-major order, in
// square tiles so that both sides stay in cache; returns false for any other layout.
template <class To, class From>
bool CopyTransposed(const StridedTensor& src, StridedTensor& dst) {
  Dims shape, strides;
  for (int64_t d = 0; d < src.shape.rank(); ++d) {
    if (src.shape[d] != 1) {
      shape.push_back(src.shape[d]);
      strides.push_back(src.strides[d]);
    }
  }
  if (shape.size() != 2 || strides[0] != 1 || strides[1] < shape[0]) return false;
  const int64_t rows = shape[0], cols = shape[1], ld = strides[1];
  constexpr int64_t kTile = 32;
  const From* in = src.data<From>();
  To* out = dst.mutable_data<To>();
  ParallelFor(src.device, (rows + kTile - 1) / kTile, std::max<int64_t>(1, kElementwiseGrain / (kTile * cols)),
              [&](int64_t lo, int64_t hi) {
                for (int64_t r0 = lo * kTile; r0 < std::min(rows, hi * kTile); r0 += kTile) {
                  for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
                    const int64_t r1 = std::min(rows, r0 + kTile), c1 = std::min(cols, c0 + kTile);
                    for (int64_t r = r0; r < r1; ++r) ConvertRun(in + r + c0 * ld, ld, out + r * cols + c0, c1 - c0);
                  }
                }
              });
  return true;
}

template <class To, class From>
void CopyKernel(const StridedTensor& src, StridedTensor& dst) {
  if (CopyTransposed<To, From>(src, dst)) return;
  const StridedIter<1> iter(src.shape, {src.strides});
  const From* in = src.data<From>();
  To* out = dst.mutable_data<To>();
  ParallelFor(src.device, iter.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    iter.ForSegments(begin, end, [&](int64_t pos, const auto& off, const auto& stride, int64_t n) {
      ConvertRun(in + off[0], stride[0], out + pos, n);
    });
  });
}

}  // namespace

StridedTensor CopyAs(const StridedTensor& src, DType dtype) {
  StridedTensor dst = StridedTensor::Empty(src.shape, dtype, src.device);
  VisitDType(src.dtype, [&](auto from) {
    VisitDType(dtype, [&](auto to) { CopyKernel<decltype(to), decltype(from)>(src, dst); });
  });
  return dst;
}

}  // namespace kiln::cpu
