// cat, gather and index_select: the ops that move whole elements between positions.
#include <cstring>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/strided.h"
#include "tensor/cat_slots.h"
#include "tensor/half_in_f32.h"
#include "tensor/index_check.h"

namespace kiln {

using cpu::StridedTensor;

namespace {

// Index values are user data: every one is checked before anything is read through it.
void CheckIndices(const StridedTensor& index, int64_t size, const char* what, const Shape& source) {
  const StridedTensor idx = Cpu::contiguous(index);
  CheckIndexValues(idx.data<int64_t>(), idx.shape.numel(), size, what, source);
}

// Rows of `inner` elements: the shape as [outer, shape[dim], inner].
int64_t Outer(const Shape& s, int64_t dim) {
  int64_t n = 1;
  for (int64_t d = 0; d < dim; ++d) n *= s[d];
  return n;
}
int64_t Inner(const Shape& s, int64_t dim) {
  int64_t n = 1;
  for (int64_t d = dim + 1; d < s.rank(); ++d) n *= s[d];
  return n;
}

}  // namespace

Cpu::Primitive Cpu::cat(absl::Span<const Primitive> parts, int64_t dim) {
  StridedTensor out = StridedTensor::Empty(CatShape(parts, dim), parts[0].dtype, parts[0].device);
  const int64_t es = DTypeSize(out.dtype);
  const int64_t outer = Outer(out.shape, dim), inner = Inner(out.shape, dim);
  const int64_t out_row = out.shape[dim] * inner * es;  // bytes from one outer row to the next
  ForEachCatSlot(out, parts, dim, [&](const StridedTensor& part, const StridedTensor& slot) {
    // A dense part is `outer` runs of bytes, each landing at the same place in a row of `out`.
    const StridedTensor c = contiguous(part);
    const int64_t run = c.shape[dim] * inner * es;
    const std::byte* src = c.buffer->data() + c.offset * es;
    std::byte* dst = slot.buffer->data() + slot.offset * es;
    if (run > 0) {
      cpu::ParallelFor(out.device, outer, std::max<int64_t>(1, (1 << 18) / run), [&](int64_t lo, int64_t hi) {
        for (int64_t r = lo; r < hi; ++r) std::memcpy(dst + r * out_row, src + r * run, run);
      });
    }
  });
  return out;
}

Cpu::Primitive Cpu::index_select(const Primitive& p, int64_t dim, const Primitive& index) {
  CheckIndices(index, p.shape[dim], "index_select", p.shape);
  const StridedTensor idx = contiguous(index);
  const StridedTensor src = contiguous(p);
  const int64_t count = idx.shape.numel();
  Dims dims(p.shape.dims().begin(), p.shape.dims().end());
  dims[dim] = count;
  StridedTensor out = StridedTensor::Empty(Shape(dims), p.dtype, p.device);
  const int64_t es = DTypeSize(p.dtype);
  const int64_t outer = Outer(p.shape, dim), inner = Inner(p.shape, dim), size = p.shape[dim];
  const int64_t* ids = idx.data<int64_t>();
  const std::byte* s = src.buffer->data() + src.offset * es;
  std::byte* o = out.mutable_data<std::byte>();
  if (inner == 1) {  // single elements (im2col): a typed loop, not a memcpy per element
    VisitDType(p.dtype, [&](auto v) {
      using T = decltype(v);
      const T* from = reinterpret_cast<const T*>(s);
      T* to = reinterpret_cast<T*>(o);
      cpu::ParallelFor(p.device, outer, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(count, 1)),
                       [&](int64_t lo, int64_t hi) {
                         for (int64_t r = lo; r < hi; ++r) {
                           const T* row = from + r * size;
                           T* dst = to + r * count;
                           for (int64_t k = 0; k < count; ++k) dst[k] = row[ids[k]];
                         }
                       });
    });
    return out;
  }
  const int64_t run = inner * es;
  cpu::ParallelFor(p.device, outer * count, std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(run, 1)),
                   [&](int64_t lo, int64_t hi) {
                     for (int64_t w = lo; w < hi; ++w) {
                       const int64_t r = w / count, k = w % count;
                       std::memcpy(o + w * run, s + (r * size + ids[k]) * run, run);
                     }
                   });
  return out;
}

Cpu::Primitive Cpu::gather(const Primitive& p, int64_t dim, const Primitive& index) {
  CheckIndices(index, p.shape[dim], "gather", p.shape);
  StridedTensor out = StridedTensor::Empty(index.shape, p.dtype, p.device);
  // Walk the index; the source's stride along `dim` is applied per element from the index.
  Dims source_strides(p.strides.begin(), p.strides.end());
  const int64_t step = source_strides[dim];
  source_strides[dim] = 0;
  const cpu::StridedIter<2> iter(index.shape, {index.strides, source_strides});
  const int64_t* ids = index.data<int64_t>();
  VisitDType(p.dtype, [&](auto v) {
    using T = decltype(v);
    const T* src = p.data<T>();
    T* o = out.mutable_data<T>();
    cpu::ParallelFor(p.device, iter.numel(), cpu::kElementwiseGrain, [&](int64_t lo, int64_t hi) {
      iter.ForSegments(lo, hi, [&](int64_t pos, const auto& off, const auto& st, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
          o[pos + i] = src[off[1] + i * st[1] + ids[off[0] + i * st[0]] * step];
        }
      });
    });
  });
  return out;
}

Cpu::Primitive Cpu::scatter_add(const Primitive& src, int64_t dim, const Primitive& index, const Shape& shape) {
  if (IsHalf(src.dtype)) return HalfInF32<Cpu>::scatter_add(src, dim, index, shape);
  CheckIndices(index, shape[dim], "scatter_add", shape);
  StridedTensor out = full(shape, 0, src.dtype, src.device);
  Dims target_strides(out.strides.begin(), out.strides.end());
  const int64_t step = target_strides[dim];
  target_strides[dim] = 0;
  const cpu::StridedIter<3> iter(index.shape, {index.strides, src.strides, target_strides});
  const int64_t* ids = index.data<int64_t>();
  VisitComputeDType(src.dtype, [&](auto v) {
    using T = decltype(v);
    if constexpr (!std::is_same_v<T, bool>) {
      const T* in = src.data<T>();
      T* o = out.mutable_data<T>();
      // Positions that share their coordinates before `dim` write into one slab of the
      // output and no other, so slabs run in parallel; within a slab the order is fixed, so
      // the result is deterministic.
      const int64_t outer = Outer(index.shape, dim);
      const int64_t per_slab = outer == 0 ? 0 : iter.numel() / outer;
      cpu::ParallelFor(src.device, outer, std::max<int64_t>(1, cpu::kElementwiseGrain / std::max<int64_t>(per_slab, 1)),
                       [&](int64_t lo, int64_t hi) {
                         iter.ForSegments(
                             lo * per_slab, hi * per_slab, [&](int64_t, const auto& off, const auto& st, int64_t n) {
                               for (int64_t i = 0; i < n; ++i) {
                                 o[off[2] + i * st[2] + ids[off[0] + i * st[0]] * step] += in[off[1] + i * st[1]];
                               }
                             });
                       });
    }
  });
  return out;
}

}  // namespace kiln
