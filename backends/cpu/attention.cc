// GPT's causal self-attention (tensor/op_table.h, FusedAttention) as one task per (sequence,
// head): q, k and v are read in place from the packed projections, the head's scores, softmax
// and weighted values stay in cache, and y and the gradient of qkv are written in place with the
// heads side by side. So none of the composition's head permutes, slices, zero-filled slice
// gradients and their sums exist. Queries go in blocks of 64: a block's scores stop at its last
// query, so the masked half of the scores is neither computed nor multiplied by v. Each head's
// arithmetic is the composition's (scores, times the scale, softmax; the same backward), summed
// by blocks of queries.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "Eigen/Core"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/half_blocks.h"
#include "backends/cpu/half_convert.h"
#include "backends/cpu/kernels.h"

namespace kiln {

using cpu::MatrixLayout;
using cpu::StridedTensor;

namespace {

constexpr int64_t kQueryBlock = 64;

template <class T>
using Row = Eigen::Map<Eigen::Array<T, Eigen::Dynamic, 1>>;
template <class T>
using ConstRow = Eigen::Map<const Eigen::Array<T, Eigen::Dynamic, 1>>;

// A row-major matrix with rows `ld` apart, and the transpose of one read in place.
MatrixLayout RowMajor(int64_t ld) { return {true, ld}; }
MatrixLayout Transposed(int64_t ld) { return {false, ld}; }

// One (sequence, head): its q, k and v columns in the packed projections (rows ld apart), its
// weights (s x s), its output or gradient columns (rows ld_out apart).
template <class T>
struct Head {
  const T *q, *k, *v;
  int64_t ld, s, hd;
  T scale;
};

// Scores of `keep` columns to softmax(scale x), in place; columns [keep, width) are set to 0.
template <class T>
void SoftmaxRow(T* x, int64_t keep, int64_t width, T scale) {
  Row<T> r(x, keep);
  r *= scale;
  r = (r - r.maxCoeff()).exp();
  r *= T(1) / r.sum();
  std::fill(x + keep, x + width, T(0));
}

// Gradient of the scores from that of the weights, in place: w (g - sum(g w)) times the scale,
// over `keep` columns; columns [keep, width) are set to 0.
template <class T>
void SoftmaxBackwardRow(const T* w, T* g, int64_t keep, int64_t width, T scale) {
  const ConstRow<T> wr(w, keep);
  Row<T> gr(g, keep);
  gr = wr * (gr - (gr * wr).sum());
  gr *= scale;
  std::fill(g + keep, g + width, T(0));
}

template <class T>
void ForwardHead(const Head<T>& h, T* weights, T* y, int64_t ld_out) {
  for (int64_t r0 = 0; r0 < h.s; r0 += kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, h.s - r0), cols = r0 + rows;
    T* w = weights + r0 * h.s;
    cpu::Gemm(h.q + r0 * h.ld, RowMajor(h.ld), h.k, Transposed(h.ld), w, h.s, rows, h.hd, cols, false);
    for (int64_t i = 0; i < rows; ++i) SoftmaxRow(w + i * h.s, r0 + i + 1, h.s, h.scale);
    cpu::Gemm(w, RowMajor(h.s), h.v, RowMajor(h.ld), y + r0 * ld_out, ld_out, rows, cols, h.hd, false);
  }
}

// The head's gradients into gq, gk, gv (rows h.ld apart). The last block of queries reaches
// every key, so it writes gk and gv whole and the earlier blocks add to their prefixes.
template <class T>
void BackwardHead(const Head<T>& h, const T* weights, const T* gy, int64_t ld_gy, T* gq, T* gk, T* gv) {
  if (h.s == 0) return;
  thread_local std::vector<T> scratch;
  T* gs = cpu::ScratchAt(scratch, kQueryBlock * h.s, 0);
  const int64_t last = (h.s - 1) / kQueryBlock * kQueryBlock;
  for (int64_t r0 = last; r0 >= 0; r0 -= kQueryBlock) {
    const int64_t rows = std::min(kQueryBlock, h.s - r0), cols = r0 + rows;
    const bool add = r0 != last;
    const T* w = weights + r0 * h.s;
    const T* g = gy + r0 * ld_gy;
    cpu::Gemm(w, Transposed(h.s), g, RowMajor(ld_gy), gv, h.ld, cols, rows, h.hd, add);
    cpu::Gemm(g, RowMajor(ld_gy), h.v, Transposed(h.ld), gs, cols, rows, h.hd, cols, false);
    for (int64_t i = 0; i < rows; ++i) SoftmaxBackwardRow(w + i * h.s, gs + i * cols, r0 + i + 1, cols, h.scale);
    cpu::Gemm(gs, RowMajor(cols), h.k, RowMajor(h.ld), gq + r0 * h.ld, h.ld, rows, cols, h.hd, false);
    cpu::Gemm(gs, Transposed(cols), h.q + r0 * h.ld, RowMajor(h.ld), gk, h.ld, cols, rows, h.hd, add);
  }
}

// The packed shape [b, s, 3 d] and what it splits into.
struct Packing {
  int64_t b, s, d, heads, hd;
  Packing(const Shape& qkv, int64_t heads)
      : b(qkv[0]), s(qkv[1]), d(qkv[2] / 3), heads(heads), hd(qkv[2] / 3 / heads) {}
  // Head `task` (sequence task / heads, head task % heads) of packed projections at `qkv`.
  template <class T>
  Head<T> At(const T* qkv, int64_t task) const {
    const T* base = qkv + task / heads * s * 3 * d + task % heads * hd;
    return {base, base + d, base + 2 * d, 3 * d, s, hd, T(Scale())};
  }
  double Scale() const { return 1 / std::sqrt(static_cast<double>(hd)); }
  // Offset of head `task`'s first column in a [b, s, width] tensor.
  int64_t Column(int64_t task, int64_t width) const { return task / heads * s * width + task % heads * hd; }
};

// Half operands: one task's columns widened into f32 scratch of its own, computed there by the
// f32 code and rounded once on the way out, so the whole tensors are never copied to f32 (as
// HalfInF32 would) and the scratch of one head stays in L2. The scratch holds the head's rows
// of [q | k | v] side by side, the packed layout of a single head. The weights' scratch sits where
// the task's weights sit in a whole f32 tensor, modulo 64 bytes (cpu::ScratchAt), so the rows'
// softmax gives the f32 kernel's bits.

// `rows` runs of `width` values, `ld_from` apart, converted to runs `ld_to` apart.
template <class From, class To>
void ConvertRows(const From* from, int64_t ld_from, To* to, int64_t ld_to, int64_t rows, int64_t width) {
  for (int64_t r = 0; r < rows; ++r) {
    if constexpr (std::is_same_v<To, float>) {
      cpu::HalfToFloat(from + r * ld_from, 1, to + r * ld_to, width);
    } else {
      cpu::FloatToHalf(from + r * ld_from, 1, to + r * ld_to, width);
    }
  }
}

template <class H>
Head<float> WidenHead(const Packing& p, const H* qkv, int64_t task, std::vector<float>& scratch) {
  const Head<H> h = p.At(qkv, task);
  scratch.resize(p.s * 3 * p.hd);
  float* q = scratch.data();
  for (int64_t part = 0; part < 3; ++part) ConvertRows(h.q + part * p.d, h.ld, q + part * p.hd, 3 * p.hd, p.s, p.hd);
  return {q, q + p.hd, q + 2 * p.hd, 3 * p.hd, p.s, p.hd, static_cast<float>(p.Scale())};
}

template <class H>
void ForwardHalfHead(const Packing& p, const H* qkv, int64_t task, H* weights, H* y) {
  thread_local std::vector<float> widened, w_scratch, out;
  const Head<float> h = WidenHead(p, qkv, task, widened);
  float* w = cpu::ScratchAt(w_scratch, p.s * p.s, task * p.s * p.s);
  out.resize(p.s * p.hd);
  ForwardHead(h, w, out.data(), p.hd);
  cpu::FloatToHalf(w, 1, weights + task * p.s * p.s, p.s * p.s);
  ConvertRows(out.data(), p.hd, y + p.Column(task, p.d), p.d, p.s, p.hd);
}

template <class H>
void BackwardHalfHead(const Packing& p, const H* qkv, const H* weights, const H* gy, int64_t task, H* dqkv) {
  thread_local std::vector<float> widened, w_scratch, g, grad;
  const Head<float> h = WidenHead(p, qkv, task, widened);
  float* w = cpu::ScratchAt(w_scratch, p.s * p.s, task * p.s * p.s);
  cpu::HalfToFloat(weights + task * p.s * p.s, 1, w, p.s * p.s);
  g.resize(p.s * p.hd);
  ConvertRows(gy + p.Column(task, p.d), p.d, g.data(), p.hd, p.s, p.hd);
  grad.resize(p.s * 3 * p.hd);
  float* gq = grad.data();
  BackwardHead(h, w, g.data(), p.hd, gq, gq + p.hd, gq + 2 * p.hd);
  H* out = dqkv + p.Column(task, 3 * p.d);
  for (int64_t part = 0; part < 3; ++part)
    ConvertRows(gq + part * p.hd, 3 * p.hd, out + part * p.d, 3 * p.d, p.s, p.hd);
}

}  // namespace

AttentionForward<Cpu::Primitive> Cpu::causal_attention(const Primitive& qkv, int64_t heads) {
  const StridedTensor in = contiguous(qkv);
  const Packing p(qkv.shape, heads);
  AttentionForward<Primitive> out{StridedTensor::Empty(Shape{p.b, p.s, p.d}, qkv.dtype, qkv.device),
                                  StridedTensor::Empty(Shape{p.b, heads, p.s, p.s}, qkv.dtype, qkv.device)};
  cpu::ForFloatOrHalf(qkv.dtype, [&](auto t) {
    using T = decltype(t);
    const T* src = in.data<T>();
    T *y = out.y.mutable_data<T>(), *weights = out.weights.mutable_data<T>();
    cpu::ParallelFor(qkv.device, p.b * heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        if constexpr (kIsHalf<T>) {
          ForwardHalfHead(p, src, task, weights, y);
        } else {
          ForwardHead(p.At(src, task), weights + task * p.s * p.s, y + p.Column(task, p.d), p.d);
        }
      }
    });
  });
  return out;
}

Cpu::Primitive Cpu::causal_attention_backward(const Primitive& qkv, const Primitive& weights, const Primitive& gy,
                                              int64_t heads) {
  const StridedTensor in = contiguous(qkv), w = contiguous(weights), g = contiguous(gy);
  const Packing p(qkv.shape, heads);
  StridedTensor out = StridedTensor::Empty(qkv.shape, qkv.dtype, qkv.device);
  cpu::ForFloatOrHalf(qkv.dtype, [&](auto t) {
    using T = decltype(t);
    const T *src = in.data<T>(), *wv = w.data<T>(), *gv = g.data<T>();
    T* dst = out.mutable_data<T>();
    cpu::ParallelFor(qkv.device, p.b * heads, 1, [&](int64_t begin, int64_t end) {
      for (int64_t task = begin; task < end; ++task) {
        if constexpr (kIsHalf<T>) {
          BackwardHalfHead(p, src, wv, gv, task, dst);
        } else {
          T* gq = dst + p.Column(task, 3 * p.d);
          BackwardHead(p.At(src, task), wv + task * p.s * p.s, gv + p.Column(task, p.d), p.d, gq, gq + p.d,
                       gq + 2 * p.d);
        }
      }
    });
  });
  return out;
}

}  // namespace kiln
