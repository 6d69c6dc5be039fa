#include "nn/convert_dtype.h"

#include <type_traits>

namespace kiln::nn {
namespace {

// One element of type From as To. ToHalf rounds correctly from any source (f64 by round to
// odd, then to nearest even); f64 -> f32 is the hardware's round to nearest even; the rest
// widen exactly.
template <class To, class From>
To ConvertOne(From v) {
  if constexpr (kIsHalf<To>) {
    return ToHalf<To>(v);
  } else if constexpr (kIsHalf<From>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

}  // namespace

TensorData ConvertDType(const TensorData& data, DType to) {
  if (!CanConvertDType(data.dtype(), to)) {
    ThrowInvalidArgument("ConvertDType: %s to %s; only floating dtypes are converted", DTypeName(data.dtype()),
                         DTypeName(to));
  }
  if (data.dtype() == to) return data;
  TensorData out(data.shape(), to);
  VisitDType(data.dtype(), [&](auto from_tag) {
    using From = decltype(from_tag);
    VisitDType(to, [&](auto to_tag) {
      using To = decltype(to_tag);
      // Only floating pairs get here (bool is integral too); the others are not instantiated.
      if constexpr (!std::is_integral_v<From> && !std::is_integral_v<To>) {
        const auto in = data.values<From>();
        const auto result = out.mutable_values<To>();
        for (size_t i = 0; i < in.size(); ++i) result[i] = ConvertOne<To>(in[i]);
      }
    });
  });
  return out;
}

}  // namespace kiln::nn
