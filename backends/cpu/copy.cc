// Strided copies and dtype conversions.
#include <cmath>
#include <type_traits>

#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "tensor/scalar.h"

namespace kiln::cpu {
namespace {

template <class To, class From>
To Convert(From x) {
  if constexpr (std::is_same_v<To, bool>) {
    return x != From(0);
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    return Scalar::FloatToInt<To>(x);  // saturating, NaN -> 0: a plain cast would be UB
  } else {
    return static_cast<To>(x);
  }
}

template <class To, class From>
void CopyKernel(const StridedTensor& src, StridedTensor& dst) {
  const StridedIter<1> iter(src.shape, {src.strides});
  const From* in = src.data<From>();
  To* out = dst.mutable_data<To>();
  ParallelFor(src.device, iter.numel(), kElementwiseGrain, [&](int64_t begin, int64_t end) {
    iter.ForSegments(begin, end, [&](int64_t pos, const auto& off, const auto& stride, int64_t n) {
      const From* x = in + off[0];
      To* y = out + pos;
      if (stride[0] == 1) {
        for (int64_t i = 0; i < n; ++i) y[i] = Convert<To>(x[i]);
      } else {
        const int64_t s = stride[0];
        for (int64_t i = 0; i < n; ++i) y[i] = Convert<To>(x[i * s]);
      }
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
