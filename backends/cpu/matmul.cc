// Batched matmul through Eigen's GEMM (gemm.h: the AVX2 or AVX-512 build of it), or a bf16 kernel (AMX, or AVX-512
// BF16) where the CPU has one. Transposed views are read in place (a column-major map), broadcast batch dims cost
// nothing, and work is split over batches and row blocks (column blocks for wide bf16 products) so each of the
// device's threads runs one single-threaded GEMM.
#include <optional>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/gemm.h"
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
// The bf16 kernels' column blocks are whole 32-column register blocks (gemm_bf16_*.h's kNR).
constexpr int64_t kBf16ColumnAlign = 32, kMinColsPerBlock = 64;

}  // namespace

Cpu::Primitive Cpu::matmul(const Primitive& a, const Primitive& b) {
  const bool native_bf16 = a.dtype == DType::kBF16 && cpu::NativeBf16Gemm();
  if (IsHalf(a.dtype) && !native_bf16) return HalfInF32<Cpu>::matmul(a, b);
  const Shape out_shape = *MatmulShape(a.shape, b.shape).out;
  const int64_t r = out_shape.rank();
  const int64_t m = out_shape[r - 2], n = out_shape[r - 1], k = a.shape[a.shape.rank() - 1];
  const Shape batch(out_shape.dims().subspan(0, r - 2));
  StridedTensor out = StridedTensor::Empty(out_shape, a.dtype, a.device);
  const Operand pa = Prepare(a, batch);
  const Operand pb = Prepare(b, batch);
  const int64_t batches = batch.numel();

  // Batch offsets of each operand, in row-major order over the batch dims.
  std::vector<int64_t> offset_a(batches), offset_b(batches);
  const cpu::StridedIter<2> iter(batch, {pa.batch_strides, pb.batch_strides});
  iter.ForSegments(0, batches, [&](int64_t pos, const auto& off, const auto& st, int64_t len) {
    for (int64_t i = 0; i < len; ++i) {
      offset_a[pos + i] = off[0] + i * st[0];
      offset_b[pos + i] = off[1] + i * st[1];
    }
  });

  const int64_t threads = cpu::ThreadsOf(a.device);
  const bool parallel = batches * m * n * k >= kParallelWork && threads > 1;
  // Each thread packs all of B for its rows; the bf16 kernels also take column blocks, where each
  // packs its share of B and all of A (cheaper when C is at least as wide as it is tall).
  int64_t row_blocks = 1, col_blocks = 1;
  if (parallel && batches < threads) {
    const int64_t want = (threads + batches - 1) / batches;
    if (native_bf16 && n >= m) {
      col_blocks = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, n / kMinColsPerBlock));
    } else {
      row_blocks = std::clamp<int64_t>(want, 1, std::max<int64_t>(1, m / kMinRowsPerBlock));
    }
  }
  const int64_t rows_per_block = (m + row_blocks - 1) / row_blocks;
  const int64_t cols_per_block =
      ((n + col_blocks - 1) / col_blocks + kBf16ColumnAlign - 1) / kBf16ColumnAlign * kBf16ColumnAlign;
  const int64_t blocks = row_blocks * col_blocks;

  auto gemm = [&](auto v) {
    using T = decltype(v);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, BFloat16>) {
      T* c = out.mutable_data<T>();
      if (k == 0) {
        std::fill(c, c + out_shape.numel(), T{});
        return;
      }
      const T* da = pa.t.template data<T>();
      const T* db = pb.t.template data<T>();
      auto run = [&](int64_t lo, int64_t hi) {
        for (int64_t w = lo; w < hi; ++w) {
          const int64_t bi = w / blocks;
          const int64_t r0 = (w % blocks / col_blocks) * rows_per_block;
          const int64_t c0 = (w % col_blocks) * cols_per_block;
          const int64_t rows = std::min(rows_per_block, m - r0), cols = std::min(cols_per_block, n - c0);
          if (rows <= 0 || cols <= 0) continue;
          if constexpr (std::is_same_v<T, BFloat16>) {
            cpu::GemmBlock(da + offset_a[bi], pa.layout, db + offset_b[bi], pb.layout, c + bi * m * n, r0, rows, k, n,
                           c0, cols);
          } else {
            cpu::GemmBlock(da + offset_a[bi], pa.layout, db + offset_b[bi], pb.layout, c + bi * m * n, r0, rows, k, n);
          }
        }
      };
      if (parallel)
        cpu::ParallelFor(a.device, batches * blocks, 1, run);
      else
        run(0, batches * blocks);
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
