// Element types a tensor can hold, and the compile-time bridge from a C++ type to them.
#ifndef KILN_TENSOR_DTYPE_H_
#define KILN_TENSOR_DTYPE_H_

#include <cstdint>
#include <string_view>
#include <type_traits>

#include "tensor/half.h"

namespace kiln {

// New types go at the end: the numbers are part of what processes exchange.
enum class DType : uint8_t { kF32, kF64, kI32, kI64, kBool, kBF16, kF16 };

const char* DTypeName(DType dtype);  // "f32", "f64", "i32", "i64", "bool", "bf16", "f16"
int64_t DTypeSize(DType dtype);      // bytes per element
inline bool IsHalf(DType d) { return d == DType::kBF16 || d == DType::kF16; }
inline bool IsFloating(DType d) { return d == DType::kF32 || d == DType::kF64 || IsHalf(d); }
inline bool IsInteger(DType d) { return d == DType::kI32 || d == DType::kI64; }

template <class T>
inline constexpr bool kIsDTypeValue =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
    std::is_same_v<T, bool> || kIsHalf<T>;

template <class T>
requires kIsDTypeValue<T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, double>) return DType::kF64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
  if constexpr (std::is_same_v<T, BFloat16>) return DType::kBF16;
  if constexpr (std::is_same_v<T, Float16>) return DType::kF16;
}

// Calls f(T{}) with the C++ type that stores `dtype`; the one place a dtype switch is written.
template <class F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kBF16: return f(BFloat16{});
    case DType::kF16: return f(Float16{});
    case DType::kBool: break;
  }
  return f(bool{});
}

[[noreturn]] void ThrowNotComputedInHalf(DType dtype);

// VisitDType for kernels that compute on values in their own type. Half dtypes never reach
// them (a backend computes those in f32: tensor/half_in_f32.h), so they are not instantiated;
// one that slips through is an internal error, not a wrong answer.
template <class F>
decltype(auto) VisitComputeDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kBF16:
    case DType::kF16: ThrowNotComputedInHalf(dtype);
    case DType::kBool: break;
  }
  return f(bool{});
}

}  // namespace kiln

#endif  // KILN_TENSOR_DTYPE_H_
