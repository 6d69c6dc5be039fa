// Walking N same-shaped strided operands in row-major order. Dims are coalesced first (size-1
// dims dropped, dims merged where every operand is contiguous across them), so a contiguous
// tensor becomes one long segment and the inner loops stay simple and vectorisable.
#ifndef KILN_BACKENDS_CPU_STRIDED_H_
#define KILN_BACKENDS_CPU_STRIDED_H_

#include <algorithm>
#include <array>
#include <cstdint>

#include "backends/cpu/strided_tensor.h"
#include "tensor/shape.h"
#include "tensor/strided_view.h"

namespace kiln::cpu {

using strided::BroadcastStrides;

template <int N>
class StridedIter {
 public:
  using Offsets = std::array<int64_t, N>;

  StridedIter(const Shape& shape, const std::array<Dims, N>& strides) : numel_(shape.numel()) {
    // Walk from the innermost dim outwards, merging a dim into the one inside it when every
    // operand steps through both as one.
    for (int64_t d = shape.rank() - 1; d >= 0; --d) {
      if (shape[d] == 1) continue;
      if (!shape_.empty()) {
        bool mergeable = true;
        for (int k = 0; k < N; ++k) {
          mergeable = mergeable && strides[k][d] == strides_[k].back() * shape_.back();
        }
        if (mergeable) {
          shape_.back() *= shape[d];
          continue;
        }
      }
      shape_.push_back(shape[d]);
      for (int k = 0; k < N; ++k) strides_[k].push_back(strides[k][d]);
    }
    // Stored innermost first; flip to row-major order.
    std::reverse(shape_.begin(), shape_.end());
    for (int k = 0; k < N; ++k) std::reverse(strides_[k].begin(), strides_[k].end());
    if (shape_.empty()) {  // a single element
      shape_.push_back(1);
      for (int k = 0; k < N; ++k) strides_[k].push_back(1);
    }
  }

  int64_t numel() const { return numel_; }

  // Calls fn(out_pos, offsets, inner_strides, len) for consecutive runs along the innermost
  // dim that together cover linear positions [begin, end).
  template <class F>
  void ForSegments(int64_t begin, int64_t end, F&& fn) const {
    if (begin >= end) return;
    const int64_t rank = static_cast<int64_t>(shape_.size());
    Dims index(rank);
    Offsets offsets{};
    Offsets inner{};
    int64_t rest = begin;
    for (int64_t d = rank - 1; d >= 0; --d) {
      index[d] = rest % shape_[d];
      rest /= shape_[d];
      for (int k = 0; k < N; ++k) offsets[k] += index[d] * strides_[k][d];
    }
    for (int k = 0; k < N; ++k) inner[k] = strides_[k][rank - 1];
    const int64_t inner_size = shape_[rank - 1];
    int64_t pos = begin;
    while (pos < end) {
      const int64_t len = std::min(inner_size - index[rank - 1], end - pos);
      fn(pos, offsets, inner, len);
      pos += len;
      index[rank - 1] += len;
      for (int k = 0; k < N; ++k) offsets[k] += len * inner[k];
      // Carry into outer dims.
      for (int64_t d = rank - 1; d > 0 && index[d] == shape_[d]; --d) {
        index[d] = 0;
        ++index[d - 1];
        for (int k = 0; k < N; ++k) offsets[k] += strides_[k][d - 1] - shape_[d] * strides_[k][d];
      }
    }
  }

 private:
  int64_t numel_;
  Dims shape_;
  std::array<Dims, N> strides_;
};

// Elements per parallel chunk for element-wise kernels: big enough to amortise a wake-up.
inline constexpr int64_t kElementwiseGrain = 1 << 15;

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_STRIDED_H_
