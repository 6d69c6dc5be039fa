// Reductions (sum, mean, max, min) and argmax. The input is arranged as [outer, reduced,
// inner] so that every case is one of two vectorised loops; partial results are combined in a
// fixed order, so a result never depends on the device's thread count.
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/half_blocks.h"
#include "backends/cpu/half_convert.h"
#include "backends/cpu/strided.h"
#include "tensor/half_in_f32.h"
#include "tensor/reduce_layout.h"
#include "tensor/shape_rules.h"

namespace kiln {

using cpu::StridedTensor;

namespace {

// Elements per partial result when one long row is split across threads.
constexpr int64_t kRowBlock = 1 << 14;
// Inner elements per work item for the strided [outer, reduced, inner] case.
constexpr int64_t kInnerBlock = 1 << 10;

template <class T>
using ConstVec = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

template <class T>
T Combine(ReduceOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (op == ReduceOp::kSum || op == ReduceOp::kMean) return static_cast<T>(U(a) + U(b));
  } else {
    if (op == ReduceOp::kSum || op == ReduceOp::kMean) return a + b;
    if (std::isnan(a) || std::isnan(b)) return a + b;
  }
  return op == ReduceOp::kMax ? (a > b ? a : b) : (a < b ? a : b);
}

// Reduction of one contiguous run.
template <class T>
T ReduceRun(ReduceOp op, const T* x, int64_t n) {
  if constexpr (std::is_floating_point_v<T>) {
    const ConstVec<T> v(x, n);
    if (op == ReduceOp::kMax) return v.template maxCoeff<Eigen::PropagateNaN>();
    if (op == ReduceOp::kMin) return v.template minCoeff<Eigen::PropagateNaN>();
    return v.sum();
  } else {
    T acc = x[0];
    for (int64_t i = 1; i < n; ++i) acc = Combine(op, acc, x[i]);
    return acc;
  }
}

// n elements of `x` as the reduction reads them: the elements themselves, or half elements
// widened to f32 into `scratch`, placed as the widened tensor's copy would be (cpu::ScratchAt) at
// the run's `offset` in it, so Eigen's sums take the same order as over a whole f32 copy.
template <class T, class S>
const T* Load(const S* x, int64_t n, int64_t offset, std::vector<float>& scratch) {
  if constexpr (std::is_same_v<T, S>) {
    return x;
  } else {
    float* widened = cpu::ScratchAt(scratch, n, offset);
    cpu::HalfToFloat(x, 1, widened, n);
    return widened;
  }
}

// `arranged`: the dense [outer, reduced, 1] input of storage type S, reduced in T.
template <class T, class S = T>
void ReduceRows(ReduceOp op, const StridedTensor& arranged, const ReduceLayout& l, T* out) {
  const S* x = arranged.data<S>();
  const int64_t blocks = (l.reduced + kRowBlock - 1) / kRowBlock;
  std::vector<T> partial(l.outer * blocks);
  cpu::ParallelFor(arranged.device, l.outer * blocks, 1, [&](int64_t lo, int64_t hi) {
    thread_local std::vector<float> scratch;
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t row = w / blocks, block = w % blocks;
      const int64_t at = row * l.reduced + block * kRowBlock, n = std::min(kRowBlock, l.reduced - block * kRowBlock);
      partial[w] = ReduceRun(op, Load<T>(x + at, n, at, scratch), n);
    }
  });
  for (int64_t row = 0; row < l.outer; ++row) {
    T acc = partial[row * blocks];
    for (int64_t b = 1; b < blocks; ++b) acc = Combine(op, acc, partial[row * blocks + b]);
    out[row] = acc;
  }
}

// `arranged`: the dense [outer, reduced, inner] input of storage type S, reduced in T.
template <class T, class S = T>
void ReduceStrided(ReduceOp op, const StridedTensor& arranged, const ReduceLayout& l, T* out) {
  const S* x = arranged.data<S>();
  const int64_t chunks = (l.inner + kInnerBlock - 1) / kInnerBlock;
  cpu::ParallelFor(arranged.device, l.outer * chunks, 1, [&](int64_t lo, int64_t hi) {
    thread_local std::vector<float> scratch;
    for (int64_t w = lo; w < hi; ++w) {
      const int64_t o = w / chunks;
      const int64_t i0 = (w % chunks) * kInnerBlock;
      const int64_t n = std::min(kInnerBlock, l.inner - i0);
      const S* base = x + o * l.reduced * l.inner + i0;
      T* acc = out + o * l.inner + i0;
      const T* first = Load<T>(base, n, 0, scratch);
      std::copy(first, first + n, acc);
      for (int64_t r = 1; r < l.reduced; ++r) {
        const T* row = Load<T>(base + r * l.inner, n, 0, scratch);
        for (int64_t i = 0; i < n; ++i) acc[i] = Combine(op, acc[i], row[i]);
      }
    }
  });
}

// `p` (storage type S) arranged as [outer, reduced, inner] and reduced in T into out.
template <class T, class S = T>
void ReduceArranged(ReduceOp op, const StridedTensor& p, absl::Span<const int64_t> dims, T* out) {
  const ReduceLayout l = ArrangeReduce(p.shape, dims);
  const StridedTensor arranged = ArrangeForReduce<Cpu>(p, l);
  if (l.inner == 1) {
    ReduceRows<T, S>(op, arranged, l, out);
  } else {
    ReduceStrided<T, S>(op, arranged, l, out);
  }
}

template <class T>
void DivideByExtent(T* o, int64_t n, int64_t extent) {
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(o[i] / static_cast<T>(extent));
}

// Small reduced extents (pooling windows, short rows): each output element combines the R
// elements at its base offset plus a precomputed table of offsets, straight from the input's
// strides, with no copy.
constexpr int64_t kGatheredMaximum = 64;

template <class T>
void ReduceGathered(ReduceOp op, const StridedTensor& p, absl::Span<const int64_t> dims, T* out) {
  Dims kept_shape, kept_strides, reduced_shape, reduced_strides;
  for (int64_t d = 0, k = 0; d < p.shape.rank(); ++d) {
    const bool reduced = k < static_cast<int64_t>(dims.size()) && dims[k] == d;
    k += reduced;
    (reduced ? reduced_shape : kept_shape).push_back(p.shape[d]);
    (reduced ? reduced_strides : kept_strides).push_back(p.strides[d]);
  }
  std::vector<int64_t> table;
  const cpu::StridedIter<1> window(Shape(reduced_shape), {reduced_strides});
  window.ForSegments(0, window.numel(), [&](int64_t, const auto& off, const auto& st, int64_t n) {
    for (int64_t i = 0; i < n; ++i) table.push_back(off[0] + i * st[0]);
  });
  const int64_t r = static_cast<int64_t>(table.size());
  const T* x = p.data<T>();
  const cpu::StridedIter<1> outputs(Shape(kept_shape), {kept_strides});
  cpu::ParallelFor(p.device, outputs.numel(), std::max<int64_t>(1, cpu::kElementwiseGrain / r),
                   [&](int64_t lo, int64_t hi) {
                     outputs.ForSegments(lo, hi, [&](int64_t pos, const auto& off, const auto& st, int64_t n) {
                       for (int64_t i = 0; i < n; ++i) {
                         const T* base = x + off[0] + i * st[0];
                         T acc = base[table[0]];
                         for (int64_t j = 1; j < r; ++j) acc = Combine(op, acc, base[table[j]]);
                         out[pos + i] = acc;
                       }
                     });
                   });
}

// Half input over whole rows or strided runs: the runs widened to f32 as the loops read them,
// sums in f32, each result rounded once (HalfInF32's bits without its whole-tensor f32 copy).
template <class H>
StridedTensor ReduceHalf(ReduceOp op, const StridedTensor& p, absl::Span<const int64_t> dims, const Shape& out_shape,
                         int64_t extent) {
  std::vector<float> sums(out_shape.numel());
  ReduceArranged<float, H>(op, p, dims, sums.data());
  if (op == ReduceOp::kMean) DivideByExtent(sums.data(), out_shape.numel(), extent);
  StridedTensor out = StridedTensor::Empty(out_shape, p.dtype, p.device);
  cpu::FloatToHalf(sums.data(), 1, out.mutable_data<H>(), out_shape.numel());
  return out;
}

}  // namespace

Cpu::Primitive Cpu::reduce(ReduceOp op, const Primitive& p, absl::Span<const int64_t> dims, bool keepdim) {
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  int64_t extent = 1;
  for (int64_t d : dims) extent *= p.shape[d];
  // Consecutive dims of a dense tensor with a wide inner extent vectorise best as rows.
  const bool dense_rows = p.IsContiguous() && ConsecutiveDims(dims) && dims.back() + 1 < p.shape.rank();
  const bool gathered = extent <= kGatheredMaximum && out_shape.numel() > 1 && !dense_rows;
  if (IsHalf(p.dtype)) {
    if (gathered || extent == 0 || out_shape.numel() == 0) return HalfInF32<Cpu>::reduce(op, p, dims, keepdim);
    if (p.dtype == DType::kBF16) return ReduceHalf<BFloat16>(op, p, dims, out_shape, extent);
    return ReduceHalf<Float16>(op, p, dims, out_shape, extent);
  }
  StridedTensor out = StridedTensor::Empty(out_shape, p.dtype, p.device);
  VisitComputeDType(p.dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (!std::is_same_v<T, bool>) {
      T* o = out.mutable_data<T>();
      if (extent == 0) {  // only sum and mean reach here: 0 and 0/0
        const T fill = op == ReduceOp::kMean && std::is_floating_point_v<T> ? T(NAN) : T(0);
        std::fill(o, o + out_shape.numel(), fill);
        return;
      }
      if (out_shape.numel() == 0) return;
      if (gathered) {
        ReduceGathered<T>(op, p, dims, o);
      } else {
        ReduceArranged<T>(op, p, dims, o);
      }
      if (op == ReduceOp::kMean) DivideByExtent(o, out_shape.numel(), extent);
    }
  });
  return out;
}

Cpu::Primitive Cpu::argmax(const Primitive& p, int64_t dim, bool keepdim) {
  if (IsHalf(p.dtype)) return HalfInF32<Cpu>::argmax(p, dim, keepdim);
  const int64_t dims[] = {dim};
  const Shape out_shape = ReducedShape(p.shape, dims, keepdim);
  StridedTensor out = StridedTensor::Empty(out_shape, DType::kI64, p.device);
  const ReduceLayout l = ArrangeReduce(p.shape, dims);
  const StridedTensor arranged = ArrangeForReduce<Cpu>(p, l);
  int64_t* o = out.mutable_data<int64_t>();
  VisitComputeDType(p.dtype, [&](auto v) {
    using T = decltype(v);
    const T* x = arranged.template data<T>();
    cpu::ParallelFor(p.device, l.outer * l.inner, 256, [&](int64_t lo, int64_t hi) {
      for (int64_t w = lo; w < hi; ++w) {
        const T* base = x + (w / l.inner) * l.reduced * l.inner + w % l.inner;
        T best = base[0];
        int64_t best_index = 0;
        for (int64_t r = 1; r < l.reduced; ++r) {
          const T value = base[r * l.inner];
          bool better = value > best;
          if constexpr (std::is_floating_point_v<T>) {
            better = better || (std::isnan(value) && !std::isnan(best));  // NaN is the max
          }
          if (better) {
            best = value;
            best_index = r;
          }
        }
        o[w] = best_index;
      }
    });
  });
  return out;
}

}  // namespace kiln
