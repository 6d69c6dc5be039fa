// Element-wise kernels: unary maps, broadcasting binary ops and where.
#include <atomic>
#include <bit>
#include <cmath>
#include <type_traits>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/half_convert.h"
#include "backends/cpu/streaming_store.h"
#include "backends/cpu/strided.h"
#include "tensor/half_in_f32.h"
#include "tensor/shape_rules.h"

namespace kiln {

using cpu::StridedIter;
using cpu::StridedTensor;

namespace {

// Integer arithmetic wraps (two's complement) instead of overflowing, which C++ leaves
// undefined; unsigned arithmetic is how to say that.
template <class T>
T Wrap(std::make_unsigned_t<T> x) {
  return static_cast<T>(x);
}
template <class T>
using U = std::make_unsigned_t<T>;

// ---- Unary ----------------------------------------------------------------------------------

template <class T>
using ArrayMap = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstArrayMap = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// A new tensor of x's shape, written run by run: run(in, stride, out, n) maps n input
// elements, `stride` apart, to n contiguous outputs.
template <class T, class Run>
StridedTensor MapRuns(const StridedTensor& x, Run run) {
  StridedTensor out = StridedTensor::Empty(x.shape, x.dtype, x.device);
  const StridedIter<1> iter(x.shape, {x.strides});
  const T* in = x.data<T>();
  T* o = out.mutable_data<T>();
  cpu::ParallelForElements(x.device, iter.numel(), cpu::kElementwiseGrain, [&](int64_t b, int64_t e) {
    iter.ForSegments(b, e, [&](int64_t pos, const auto& off, const auto& stride, int64_t n) {
      run(in + off[0], stride[0], o + pos, n);
    });
  });
  return out;
}

// Applies `f` (an Eigen array expression builder) to every element; strided runs go through a
// small stack buffer so the vectorised path is the only path.
template <class T, class F>
StridedTensor MapFloat(const StridedTensor& x, F f) {
  return MapRuns<T>(x, [&](const T* in, int64_t stride, T* o, int64_t n) {
    if (stride == 1) {
      ArrayMap<T>(o, n) = f(ConstArrayMap<T>(in, n));
      return;
    }
    constexpr int64_t kBlock = 256;
    alignas(64) T buffer[kBlock];
    for (int64_t i = 0; i < n; i += kBlock) {
      const int64_t m = std::min(kBlock, n - i);
      for (int64_t j = 0; j < m; ++j) buffer[j] = in[(i + j) * stride];
      ArrayMap<T>(o + i, m) = f(ConstArrayMap<T>(buffer, m));
    }
  });
}

template <class T, class F>
StridedTensor MapScalar(const StridedTensor& x, F f) {
  return MapRuns<T>(x, [&](const T* in, int64_t stride, T* o, int64_t n) {
    for (int64_t i = 0; i < n; ++i) o[i] = f(in[i * stride]);
  });
}

template <class T>
StridedTensor UnaryFloat(UnaryOp op, const StridedTensor& x) {
  switch (op) {
    case UnaryOp::kNeg: return MapFloat<T>(x, [](const auto& a) { return -a; });
    case UnaryOp::kAbs: return MapFloat<T>(x, [](const auto& a) { return a.abs(); });
    case UnaryOp::kExp: return MapFloat<T>(x, [](const auto& a) { return a.exp(); });
    case UnaryOp::kLog: return MapFloat<T>(x, [](const auto& a) { return a.log(); });
    case UnaryOp::kSqrt: return MapFloat<T>(x, [](const auto& a) { return a.sqrt(); });
    case UnaryOp::kTanh: return MapFloat<T>(x, [](const auto& a) { return a.tanh(); });
    case UnaryOp::kSigmoid: return MapFloat<T>(x, [](const auto& a) { return a.logistic(); });
    case UnaryOp::kRelu:  // NaN stays NaN, as in PyTorch
      return MapFloat<T>(x, [](const auto& a) { return (a < T(0)).select(T(0), a); });
    case UnaryOp::kErf: return MapScalar<T>(x, [](T a) { return std::erf(a); });
  }
  return x;
}

template <class T>
StridedTensor UnaryInteger(UnaryOp op, const StridedTensor& x) {
  switch (op) {
    case UnaryOp::kNeg: return MapScalar<T>(x, [](T a) { return Wrap<T>(U<T>(0) - U<T>(a)); });
    case UnaryOp::kAbs: return MapScalar<T>(x, [](T a) { return a < 0 ? Wrap<T>(U<T>(0) - U<T>(a)) : a; });
    case UnaryOp::kRelu: return MapScalar<T>(x, [](T a) { return a < 0 ? T(0) : a; });
    default: break;  // float-only ops are rejected by Tensor<B>
  }
  ThrowInvalidArgument("%s: not defined for %s", OpName(op), DTypeName(x.dtype));
}

// ---- Binary ---------------------------------------------------------------------------------

// One run of a binary op; the stride-1 and broadcast-scalar cases get their own loops so the
// compiler vectorises them.
template <class T, class R, class F>
void BinaryRun(const T* a, int64_t sa, const T* b, int64_t sb, R* out, int64_t n, F f) {
  if (sa == 1 && sb == 1) {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], b[i]);
  } else if (sa == 1 && sb == 0) {
    const T y = *b;
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i], y);
  } else if (sa == 0 && sb == 1) {
    const T x = *a;
    for (int64_t i = 0; i < n; ++i) out[i] = f(x, b[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = f(a[i * sa], b[i * sb]);
  }
}

// A binary op's output of `shape`, written run by run: run(a, sa, b, sb, out, n) computes n
// contiguous outputs from operands `sa` and `sb` apart (1, 0 for a broadcast value, or any).
template <class T, class R, class Run>
StridedTensor RunBinaryRuns(const StridedTensor& a, const StridedTensor& b, const Shape& shape, Run run) {
  StridedTensor out = StridedTensor::Empty(shape, DTypeOf<R>(), a.device);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  R* po = out.mutable_data<R>();
  // Dense operands of the output's shape, or a dense one and a single value: no iterator.
  const auto flat_stride = [&](const StridedTensor& t) -> int64_t {
    if (t.shape.numel() == 1) return 0;
    return t.shape == shape && t.IsContiguous() ? 1 : -1;
  };
  if (const int64_t sa = flat_stride(a), sb = flat_stride(b); sa >= 0 && sb >= 0) {
    const bool stream = shape.numel() * static_cast<int64_t>(sizeof(R)) >= cpu::kStreamingBytes;
    cpu::ParallelFor(a.device, shape.numel(), cpu::kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      if (!stream) {
        run(pa + lo * sa, sa, pb + lo * sb, sb, po + lo, hi - lo);
        return;
      }
      cpu::WriteStreaming(po + lo, hi - lo, [&](R* dst, int64_t at, int64_t n) {
        const T *xa = pa + (lo + at) * sa, *xb = pb + (lo + at) * sb;
        cpu::PrefetchAhead(xa, sa, n, pa + hi * sa);
        cpu::PrefetchAhead(xb, sb, n, pb + hi * sb);
        run(xa, sa, xb, sb, dst, n);
      });
    });
    return out;
  }
  const StridedIter<2> iter(shape, {cpu::BroadcastStrides(a, shape), cpu::BroadcastStrides(b, shape)});
  cpu::ParallelFor(a.device, iter.numel(), cpu::kElementwiseGrain, [&](int64_t lo, int64_t hi) {
    iter.ForSegments(lo, hi, [&](int64_t pos, const auto& off, const auto& stride, int64_t n) {
      run(pa + off[0], stride[0], pb + off[1], stride[1], po + pos, n);
    });
  });
  return out;
}

template <class T, class R, class F>
StridedTensor RunBinary(const StridedTensor& a, const StridedTensor& b, const Shape& shape, F f) {
  return RunBinaryRuns<T, R>(a, b, shape, [f](const T* x, int64_t sx, const T* y, int64_t sy, R* out, int64_t n) {
    BinaryRun(x, sx, y, sy, out, n, f);
  });
}

// maximum/minimum propagate NaN, as PyTorch does.
template <class T>
T NanMax(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
  }
  return a > b ? a : b;
}
template <class T>
T NanMin(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return a + b;
  }
  return a < b ? a : b;
}

template <class T>
StridedTensor Compare(BinaryOp op, const StridedTensor& a, const StridedTensor& b, const Shape& s) {
  switch (op) {
    case BinaryOp::kEq: return RunBinary<T, bool>(a, b, s, [](T x, T y) { return x == y; });
    case BinaryOp::kNe: return RunBinary<T, bool>(a, b, s, [](T x, T y) { return x != y; });
    case BinaryOp::kLt: return RunBinary<T, bool>(a, b, s, [](T x, T y) { return x < y; });
    case BinaryOp::kLe: return RunBinary<T, bool>(a, b, s, [](T x, T y) { return x <= y; });
    case BinaryOp::kGt: return RunBinary<T, bool>(a, b, s, [](T x, T y) { return x > y; });
    case BinaryOp::kGe: return RunBinary<T, bool>(a, b, s, [](T x, T y) { return x >= y; });
    default: break;
  }
  ThrowInvalidArgument("%s is not a comparison", OpName(op));
}

template <class T>
StridedTensor Arithmetic(BinaryOp op, const StridedTensor& a, const StridedTensor& b, const Shape& s) {
  constexpr bool kInt = std::is_integral_v<T>;
  switch (op) {
    case BinaryOp::kAdd:
      if constexpr (kInt)
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return Wrap<T>(U<T>(x) + U<T>(y)); });
      else
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return x + y; });
    case BinaryOp::kSub:
      if constexpr (kInt)
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return Wrap<T>(U<T>(x) - U<T>(y)); });
      else
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return x - y; });
    case BinaryOp::kMul:
      if constexpr (kInt)
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return Wrap<T>(U<T>(x) * U<T>(y)); });
      else
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return x * y; });
    case BinaryOp::kDiv:
      if constexpr (kInt) {
        std::atomic<bool> by_zero{false};
        StridedTensor out = RunBinary<T, T>(a, b, s, [&by_zero](T x, T y) {
          if (y == 0) {
            by_zero.store(true, std::memory_order_relaxed);
            return T(0);
          }
          return y == -1 ? Wrap<T>(U<T>(0) - U<T>(x)) : T(x / y);
        });
        if (by_zero.load()) {
          ThrowInvalidArgument("div: integer division by zero (%s%s / %s%s)", DTypeName(a.dtype), a.shape.ToString(),
                               DTypeName(b.dtype), b.shape.ToString());
        }
        return out;
      } else {
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return x / y; });
      }
    case BinaryOp::kPow:
      if constexpr (!kInt) {
        if (b.shape.numel() == 1 && *b.data<T>() == T(2)) {  // the common square
          return RunBinary<T, T>(a, b, s, [](T x, T) { return x * x; });
        }
        return RunBinary<T, T>(a, b, s, [](T x, T y) { return std::pow(x, y); });
      }
      break;
    case BinaryOp::kMaximum: return RunBinary<T, T>(a, b, s, NanMax<T>);
    case BinaryOp::kMinimum: return RunBinary<T, T>(a, b, s, NanMin<T>);
    default: break;
  }
  ThrowInvalidArgument("%s: not defined for %s", OpName(op), DTypeName(a.dtype));
}

// One run of a half op: the operands widened to f32 block by block into buffers that stay in
// L1 (backends/cpu/half_convert.h), f computed there and its result rounded once, or, for a
// comparison, stored as it is. The f32 loop runs over whole vectors (the block padded with
// zeros), so every element takes the vector instructions wherever its run starts: of two NaN
// operands, which payload survives depends on the instruction, and the bits must not depend on
// how the threads split the tensor.
template <class H, class R, class F>
void HalfBinaryRun(const H* a, int64_t sa, const H* b, int64_t sb, R* out, int64_t n, F f) {
  constexpr int64_t kBlock = 512, kVector = 16;
  alignas(64) float x[kBlock], y[kBlock], z[kBlock];
  for (int64_t i = 0; i < n; i += kBlock) {
    const int64_t m = std::min(kBlock, n - i), padded = (m + kVector - 1) / kVector * kVector;
    cpu::HalfToFloat(a + i * sa, sa, x, m);
    cpu::HalfToFloat(b + i * sb, sb, y, m);
    if constexpr (std::is_same_v<R, bool>) {
      for (int64_t j = 0; j < m; ++j) out[i + j] = f(x[j], y[j]);
    } else {
      std::fill(x + m, x + padded, 0.0f);
      std::fill(y + m, y + padded, 0.0f);
      for (int64_t j = 0; j < padded; ++j) z[j] = f(x[j], y[j]);
      cpu::FloatToHalf(z, 1, out + i, m);
    }
  }
}

// Half types: the common arithmetic and comparisons in one pass, each element widened to f32,
// computed and rounded once (what HalfInF32 gives in three passes); pow goes through HalfInF32.
template <class H>
StridedTensor HalfBinary(BinaryOp op, const StridedTensor& a, const StridedTensor& b, const Shape& s) {
  const auto run = [&]<class R>(R, auto f) {
    return RunBinaryRuns<H, R>(a, b, s, [f](const H* x, int64_t sx, const H* y, int64_t sy, R* out, int64_t n) {
      HalfBinaryRun(x, sx, y, sy, out, n, f);
    });
  };
  const auto in_f32 = [&](auto f) { return run(H{}, f); };
  const auto compare = [&](auto f) { return run(bool{}, f); };
  switch (op) {
    case BinaryOp::kAdd: return in_f32([](float x, float y) { return x + y; });
    case BinaryOp::kSub: return in_f32([](float x, float y) { return x - y; });
    case BinaryOp::kMul: return in_f32([](float x, float y) { return x * y; });
    case BinaryOp::kDiv: return in_f32([](float x, float y) { return x / y; });
    case BinaryOp::kMaximum: return in_f32(NanMax<float>);
    case BinaryOp::kMinimum: return in_f32(NanMin<float>);
    case BinaryOp::kEq: return compare([](float x, float y) { return x == y; });
    case BinaryOp::kNe: return compare([](float x, float y) { return x != y; });
    case BinaryOp::kLt: return compare([](float x, float y) { return x < y; });
    case BinaryOp::kLe: return compare([](float x, float y) { return x <= y; });
    case BinaryOp::kGt: return compare([](float x, float y) { return x > y; });
    case BinaryOp::kGe: return compare([](float x, float y) { return x >= y; });
    default: break;
  }
  return HalfInF32<Cpu>::binary(op, a, b);
}

// One run of where; unit and zero strides (the common relu-backward and masked_fill shapes)
// get loops of their own. The choice is a bit-select on the raw bits rather than `?:`, which
// the compiler will not vectorise (it may not load the operand it does not pick).
template <bool kUnitC, bool kUnitA, bool kUnitB, class T>
void WhereLoop(const bool* c, const T* a, const T* b, T* out, int64_t n) {
  using Bits = std::conditional_t<
      sizeof(T) == 8, uint64_t,
      std::conditional_t<sizeof(T) == 4, uint32_t, std::conditional_t<sizeof(T) == 2, uint16_t, uint8_t>>>;
  static_assert(sizeof(Bits) == sizeof(T));
  const auto* picks = reinterpret_cast<const unsigned char*>(c);
  for (int64_t i = 0; i < n; ++i) {
    const auto x = std::bit_cast<Bits>(a[kUnitA ? i : 0]);
    const auto y = std::bit_cast<Bits>(b[kUnitB ? i : 0]);
    const Bits mask = Bits(0) - static_cast<Bits>(picks[kUnitC ? i : 0]);
    out[i] = std::bit_cast<T>(static_cast<Bits>((x & mask) | (y & ~mask)));
  }
}

template <class T>
void WhereRun(const bool* c, int64_t sc, const T* a, int64_t sa, const T* b, int64_t sb, T* out, int64_t n) {
  const auto unit_or_zero = [](int64_t s) { return s == 0 || s == 1; };
  if (!unit_or_zero(sc) || !unit_or_zero(sa) || !unit_or_zero(sb)) {
    for (int64_t i = 0; i < n; ++i) out[i] = c[i * sc] ? a[i * sa] : b[i * sb];
    return;
  }
  switch ((sc << 2) | (sa << 1) | sb) {
    case 0b111: return WhereLoop<true, true, true>(c, a, b, out, n);
    case 0b110: return WhereLoop<true, true, false>(c, a, b, out, n);
    case 0b101: return WhereLoop<true, false, true>(c, a, b, out, n);
    case 0b100: return WhereLoop<true, false, false>(c, a, b, out, n);
    case 0b011: return WhereLoop<false, true, true>(c, a, b, out, n);
    case 0b010: return WhereLoop<false, true, false>(c, a, b, out, n);
    case 0b001: return WhereLoop<false, false, true>(c, a, b, out, n);
    default: return WhereLoop<false, false, false>(c, a, b, out, n);
  }
}

}  // namespace

Cpu::Primitive Cpu::unary(UnaryOp op, const Primitive& x) {
  if (IsHalf(x.dtype)) return HalfInF32<Cpu>::unary(op, x);
  return VisitComputeDType(x.dtype, [&](auto v) -> Primitive {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T>)
      return UnaryFloat<T>(op, x);
    else if constexpr (std::is_same_v<T, bool>)
      ThrowInvalidArgument("%s: not defined for bool", OpName(op));
    else
      return UnaryInteger<T>(op, x);
  });
}

Cpu::Primitive Cpu::binary(BinaryOp op, const Primitive& a, const Primitive& b) {
  const Shape shape = *BroadcastShapes(a.shape, b.shape);
  if (a.dtype == DType::kBF16) return HalfBinary<BFloat16>(op, a, b, shape);
  if (a.dtype == DType::kF16) return HalfBinary<Float16>(op, a, b, shape);
  return VisitComputeDType(a.dtype, [&](auto v) -> Primitive {
    using T = decltype(v);
    if (IsComparison(op)) return Compare<T>(op, a, b, shape);
    if constexpr (std::is_same_v<T, bool>) {
      ThrowInvalidArgument("%s: not defined for bool", OpName(op));
    } else {
      return Arithmetic<T>(op, a, b, shape);
    }
  });
}

Cpu::Primitive Cpu::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  const Shape shape = *BroadcastShapes(*BroadcastShapes(a.shape, b.shape), cond.shape);
  return VisitDType(a.dtype, [&](auto v) -> Primitive {
    using T = decltype(v);
    StridedTensor out = StridedTensor::Empty(shape, a.dtype, a.device);
    const StridedIter<3> iter(
        shape, {cpu::BroadcastStrides(cond, shape), cpu::BroadcastStrides(a, shape), cpu::BroadcastStrides(b, shape)});
    const bool* pc = cond.data<bool>();
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out.mutable_data<T>();
    cpu::ParallelFor(a.device, iter.numel(), cpu::kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      iter.ForSegments(lo, hi, [&](int64_t pos, const auto& off, const auto& st, int64_t n) {
        WhereRun(pc + off[0], st[0], pa + off[1], st[1], pb + off[2], st[2], po + pos, n);
      });
    });
    return out;
  });
}

}  // namespace kiln
