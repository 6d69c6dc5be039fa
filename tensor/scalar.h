// Scalar: one number given by the user (a fill value, a bound, an exponent). It keeps
// integers exact, so an i64 fill of 2^62 is not rounded through double.
#ifndef KILN_TENSOR_SCALAR_H_
#define KILN_TENSOR_SCALAR_H_

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "tensor/half.h"

namespace kiln {

class Scalar {
 public:
  template <class T>
  requires std::integral<T> Scalar(T v) : is_integer_(true), i_(static_cast<int64_t>(v)), f_(static_cast<double>(v)) {}
  template <class T>
  requires std::floating_point<T> Scalar(T v) : is_integer_(false), i_(0), f_(static_cast<double>(v)) {}

  bool is_integer() const { return is_integer_; }
  double to_double() const { return f_; }

  // The value as T: exact for integers, saturating for out-of-range floats, NaN -> 0.
  template <class T>
  T as() const {
    if constexpr (std::is_same_v<T, bool>) {
      return is_integer_ ? i_ != 0 : f_ != 0.0;
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(f_);
    } else if constexpr (kIsHalf<T>) {
      return ToHalf<T>(f_);
    } else {
      if (is_integer_) return SaturateInt<T>(i_);
      return FloatToInt<T>(f_);
    }
  }

  std::string ToString() const;

  template <class T, class F>
  static T FloatToInt(F f) {
    if (std::isnan(f)) return 0;
    if (f <= static_cast<F>(std::numeric_limits<T>::min())) return std::numeric_limits<T>::min();
    if (f >= static_cast<F>(std::numeric_limits<T>::max())) return std::numeric_limits<T>::max();
    return static_cast<T>(f);
  }

 private:
  template <class T>
  static T SaturateInt(int64_t v) {
    if (v < std::numeric_limits<T>::min()) return std::numeric_limits<T>::min();
    if (v > std::numeric_limits<T>::max()) return std::numeric_limits<T>::max();
    return static_cast<T>(v);
  }

  bool is_integer_;
  int64_t i_;
  double f_;
};

}  // namespace kiln

#endif  // KILN_TENSOR_SCALAR_H_
