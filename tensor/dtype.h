// Element types a tensor can hold, and the compile-time bridge from a C++ type to them.
#ifndef KILN_TENSOR_DTYPE_H_
#define KILN_TENSOR_DTYPE_H_

#include <cstdint>
#include <string_view>
#include <type_traits>

namespace kiln {

enum class DType : uint8_t { kF32, kF64, kI32, kI64, kBool };

const char* DTypeName(DType dtype);  // "f32", "f64", "i32", "i64", "bool"
int64_t DTypeSize(DType dtype);      // bytes per element
inline bool IsFloating(DType d) { return d == DType::kF32 || d == DType::kF64; }
inline bool IsInteger(DType d) { return d == DType::kI32 || d == DType::kI64; }

template <class T>
inline constexpr bool kIsDTypeValue =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, int32_t> || std::is_same_v<T, int64_t> ||
    std::is_same_v<T, bool>;

template <class T>
requires kIsDTypeValue<T>
constexpr DType DTypeOf() {
  if constexpr (std::is_same_v<T, float>) return DType::kF32;
  if constexpr (std::is_same_v<T, double>) return DType::kF64;
  if constexpr (std::is_same_v<T, int32_t>) return DType::kI32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::kI64;
  if constexpr (std::is_same_v<T, bool>) return DType::kBool;
}

// Calls f(T{}) with the C++ type that stores `dtype`; the one place a dtype switch is written.
template <class F>
decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kF32: return f(float{});
    case DType::kF64: return f(double{});
    case DType::kI32: return f(int32_t{});
    case DType::kI64: return f(int64_t{});
    case DType::kBool: break;
  }
  return f(bool{});
}

}  // namespace kiln

#endif  // KILN_TENSOR_DTYPE_H_
