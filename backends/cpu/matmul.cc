// Batched matmul and Linear through the CPU's GEMM kernels (gemm.h: kiln's f32 kernels, Eigen's for f64), or a
// bf16 kernel (AMX, or AVX-512 BF16) where the CPU has one. Transposed views are read in place (a column-major map),
// broadcast batch dims cost nothing, and work is split over batches and row or column blocks so each of the
// device's threads runs one single-threaded GEMM.
#include <algorithm>
#include <optional>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/strided.h"
#include "tensor/half_in_f32.h"
#include "tensor/shape_rules.h"

namespace kiln {

using cpu::MatrixLayout;
using cpu::StridedTensor;

namespace {

std::optional<MatrixLayout> LayoutOf(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= cols)) {
    return MatrixLayout{true, rows == 1 ? std::max<int64_t>(cols, 1) : rs};
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= rows)) {
    return MatrixLayout{false, cols == 1 ? std::max<int64_t>(rows, 1) : cs};
  }
  return std::nullopt;
}

struct Operand {
  StridedTensor t;  // possibly a contiguous copy of the input
  MatrixLayout layout;
  Dims batch_strides;  // over the output's batch dims
};

Operand Prepare(const StridedTensor& p, const Shape& batch) {
  const int64_t r = p.shape.rank();
  const int64_t rows = p.shape[r - 2], cols = p.shape[r - 1];
  Operand op{p, {true, cols}, {}};
  if (auto layout = LayoutOf(rows, cols, p.strides[r - 2], p.strides[r - 1])) {
    op.layout = *layout;
  } else {
    op.t = Cpu::contiguous(p);
    op.layout = {true, std::max<int64_t>(cols, 1)};
  }
  // Batch strides as a broadcast of the operand's leading dims to `batch`.
  op.batch_strides = cpu::BroadcastStrides(op.t, batch, r - 2);
  return op;
}

// Below this many multiply-adds a single thread is faster than waking others.
constexpr int64_t kParallelWork = 1 << 20;
constexpr int64_t kMinRowsPerBlock = 16;
// Column blocks are whole register blocks of every kernel (32 columns: the bf16 kernels' and the
// AVX-512 f32 kernel's kNR, twice the AVX2 kernel's).
constexpr int64_t kColumnAlign = 32, kMinColsPerBlock = 64;

// One batched product: C[b] (m x n) = A[b] (m x k) B[b] (k x n).
struct Product {
  int64_t m, n, k, batches;
  // Batch offsets of each operand, in row-major order over the batch dims.
  std::vector<int64_t> offset_a, offset_b;
};

Product PlanProduct(const Shape& out_shape, int64_t k, const Shape& batch, const Operand& pa, const Operand& pb) {
  const int64_t r = out_shape.rank();
  const int64_t batches = batch.numel();
  Product p{.m = out_shape[r - 2], .n = out_shape[r - 1], .k = k, .batches = batches};
  p.offset_a.resize(batches);
  p.offset_b.resize(batches);
  const cpu::StridedIter<2> iter(batch, {pa.batch_strides, pb.batch_strides});
  iter.ForSegments(0, batches, [&](int64_t pos, const auto& off, const auto& st, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      p.offset_a[pos + i] = off[0] + i * st[0];
      p.offset_b[pos + i] = off[1] + i * st[1];
    }
  });
  return p;
}

// How the product's work is cut over the device's threads: whole batches, each in row or
// column blocks when there are fewer batches than threads. Each block packs the part of B its
// columns need and the part of A its rows need: row blocks each pack all of B, column blocks each
// pack all of A, so C at least as wide as it is tall (a small batch's rows times a layer's
// width) splits by columns. Every kernel of kiln's sums each element of C in one fixed order,
// so the split does not change a bit (Eigen's AVX2 GEMM, KILN_CPU_GEMM=avx2, makes no such
// promise).
struct Blocks {
  bool parallel;
  int64_t row_blocks = 1, col_blocks = 1;
  int64_t rows_per_block = 0, cols_per_block = 0, blocks = 0;

  // Work item w of a product m x n: its batch, its first row and column, and its extent
  // (rows or cols <= 0: nothing left for it).
  struct Block {
    int64_t batch, r0, c0, rows, cols;
  };
  Block At(int64_t w, int64_t m, int64_t n) const {
    const int64_t r0 = (w % blocks / col_blocks) * rows_per_block, c0 = (w % col_blocks) * cols_per_block;
    return {w / blocks, r0, c0, std::min(rows_per_block, m - r0), std::min(cols_per_block, n - c0)};
  }
};

Blocks SplitWork(const Product& p, int64_t threads) {
  Blocks s{.parallel = p.batches * p.m * p.n * p.k >= kParallelWork && threads > 1};
  if (s.parallel && p.batches < threads) {
    const int64_t want = (threads + p.batches - 1) / p.batches;
    if (p.n >= p.m) {
      s.col_blocks = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, p.n / kMinColsPerBlock));
    } else {
      s.row_blocks = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, p.m / kMinRowsPerBlock));
    }
  }
  s.rows_per_block = (p.m + s.row_blocks - 1) / s.row_blocks;
  s.cols_per_block = ((p.n + s.col_blocks - 1) / s.col_blocks + kColumnAlign - 1) / kColumnAlign * kColumnAlign;
  s.blocks = s.row_blocks * s.col_blocks;
  return s;
}

// The product into `c` (batches * m * n elements), one single-threaded GEMM per block.
template <class T>
void Gemm(const Operand& pa, const Operand& pb, const Product& p, const Blocks& s, T* c, const CpuDevice& device) {
  if (p.k == 0) {
    std::fill(c, c + p.batches * p.m * p.n, T{});
    return;
  }
  const T* da = pa.t.template data<T>();
  const T* db = pb.t.template data<T>();
  const int64_t m = p.m, n = p.n, k = p.k;
  auto run = [&](int64_t lo, int64_t hi) {
    for (int64_t w = lo; w < hi; ++w) {
      const Blocks::Block at = s.At(w, m, n);
      if (at.rows <= 0 || at.cols <= 0) continue;
      const T* const a = da + p.offset_a[at.batch];
      const T* const b = db + p.offset_b[at.batch];
      T* const cb = c + at.batch * m * n;
      if constexpr (std::is_same_v<T, BFloat16>) {
        cpu::GemmBlock(a, pa.layout, b, pb.layout, cb, at.r0, at.rows, k, n, at.c0, at.cols);
      } else {
        const MatrixLayout &la = pa.layout, &lb = pb.layout;
        cpu::Gemm(a + at.r0 * (la.row_major ? la.ld : 1), la, b + at.c0 * (lb.row_major ? 1 : lb.ld), lb,
                  cb + at.r0 * n + at.c0, n, at.rows, k, at.cols, false);
      }
    }
  };
  if (s.parallel)
    cpu::ParallelFor(device, p.batches * s.blocks, 1, run);
  else
    run(0, p.batches * s.blocks);
}

// Rows [r0, r0 + rows) x columns [c0, c0 + cols) of y = x w^T + bias: the bias copied into each
// row, then the product added to it (the GEMM accumulates into C: the bias takes the place of its
// zero fill).
template <class T>
void LinearBlock(const T* x, const T* w, const T* bias, T* y, int64_t r0, int64_t rows, int64_t c0, int64_t cols,
                 int64_t in, int64_t out) {
  T* block = y + r0 * out + c0;
  for (int64_t r = 0; r < rows; ++r) {
    if (bias != nullptr) {
      std::copy(bias + c0, bias + c0 + cols, block + r * out);
    } else if (in == 0) {
      std::fill(block + r * out, block + r * out + cols, T{});
    }
  }
  if (in > 0) cpu::Gemm(x + r0 * in, {true, in}, w + c0 * in, {false, in}, block, out, rows, in, cols, bias != nullptr);
}

}  // namespace

Cpu::Primitive Cpu::linear(const Primitive& x, const Primitive& weight, const Primitive* bias) {
  const int64_t in = weight.shape[1], out = weight.shape[0];
  Dims dims(x.shape.dims().begin(), x.shape.dims().end());
  dims.back() = out;
  const int64_t rows = Shape(Dims(dims.begin(), dims.end() - 1)).numel();
  if (IsHalf(x.dtype)) {  // the bf16 GEMM writes C whole: the bias is added after it
    const Primitive y = reshape(matmul(reshape(x, Shape{rows, in}), permute(weight, {1, 0})), Shape(dims));
    return bias != nullptr ? binary(BinaryOp::kAdd, y, *bias) : y;
  }
  const StridedTensor xc = contiguous(x), wc = contiguous(weight);
  const StridedTensor bc = bias != nullptr ? contiguous(*bias) : StridedTensor{};
  StridedTensor y = StridedTensor::Empty(Shape(dims), x.dtype, x.device);
  const Blocks s = SplitWork(Product{.m = rows, .n = out, .k = in, .batches = 1}, cpu::ThreadsOf(x.device));
  cpu::ForFloat(x.dtype, [&](auto t) {
    using T = decltype(t);
    const T *xs = xc.data<T>(), *ws = wc.data<T>(), *bs = bias != nullptr ? bc.data<T>() : nullptr;
    T* ys = y.mutable_data<T>();
    auto run = [&](int64_t lo, int64_t hi) {
      for (int64_t w = lo; w < hi; ++w) {
        const Blocks::Block at = s.At(w, rows, out);
        if (at.rows > 0 && at.cols > 0) LinearBlock(xs, ws, bs, ys, at.r0, at.rows, at.c0, at.cols, in, out);
      }
    };
    if (s.parallel) {
      cpu::ParallelFor(x.device, s.blocks, 1, run);
    } else {
      run(0, s.blocks);
    }
  });
  return y;
}

Cpu::Primitive Cpu::matmul(const Primitive& a, const Primitive& b) {
  const bool native_bf16 = a.dtype == DType::kBF16 && cpu::NativeBf16Gemm();
  if (IsHalf(a.dtype) && !native_bf16) return HalfInF32<Cpu>::matmul(a, b);
  const Shape out_shape = *MatmulShape(a.shape, b.shape).out;
  const int64_t r = out_shape.rank();
  const Shape batch(out_shape.dims().subspan(0, r - 2));
  StridedTensor out = StridedTensor::Empty(out_shape, a.dtype, a.device);
  const Operand pa = Prepare(a, batch);
  const Operand pb = Prepare(b, batch);
  const Product p = PlanProduct(out_shape, a.shape[a.shape.rank() - 1], batch, pa, pb);
  const Blocks blocks = SplitWork(p, cpu::ThreadsOf(a.device));
  auto gemm = [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16>) {
      Gemm(pa, pb, p, blocks, out.mutable_data<T>(), a.device);
    }
  };
  if (native_bf16) {
    gemm(BFloat16{});
  } else {
    VisitComputeDType(a.dtype, gemm);
  }
  return out;
}

}  // namespace kiln
