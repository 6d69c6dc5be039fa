// An independent reference for the conformance suite: naive, index-by-index definitions in
// double precision, written from the NumPy semantics rather than from kiln's kernels.
#ifndef KILN_TESTS_TENSOR_REFERENCE_H_
#define KILN_TESTS_TENSOR_REFERENCE_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "tensor/tensor_data.h"

namespace kiln::testing {

using Index = std::vector<int64_t>;

struct Ref {
  Index shape;
  std::vector<double> v;

  static Ref Of(const TensorData& d) {
    return {Index(d.shape().dims().begin(), d.shape().dims().end()), d.ToDoubles()};
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

inline Index Unravel(int64_t flat, const Index& shape) {
  Index idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

inline int64_t Ravel(const Index& idx, const Index& shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d) flat = flat * shape[d] + idx[d];
  return flat;
}

inline Ref Make(const Index& shape) {
  Ref r{shape, {}};
  r.v.assign(r.numel(), 0.0);
  return r;
}

// Element of `a` seen through a broadcast to an output index (aligned from the right).
inline double BroadcastAt(const Ref& a, const Index& out_idx) {
  Index idx(a.shape.size());
  const size_t lead = out_idx.size() - a.shape.size();
  for (size_t d = 0; d < a.shape.size(); ++d) idx[d] = a.shape[d] == 1 ? 0 : out_idx[lead + d];
  return a.v[Ravel(idx, a.shape)];
}

inline Index BroadcastShape(const Index& a, const Index& b) {
  const size_t rank = std::max(a.size(), b.size());
  Index out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i + a.size() < rank ? 1 : a[i + a.size() - rank];
    const int64_t db = i + b.size() < rank ? 1 : b[i + b.size() - rank];
    out[i] = da == 1 ? db : da;
  }
  return out;
}

inline Ref Map(const Ref& a, const std::function<double(double)>& f) {
  Ref r = a;
  for (double& x : r.v) x = f(x);
  return r;
}

inline Ref Zip(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  Ref r = Make(BroadcastShape(a.shape, b.shape));
  for (int64_t i = 0; i < r.numel(); ++i) {
    const Index idx = Unravel(i, r.shape);
    r.v[i] = f(BroadcastAt(a, idx), BroadcastAt(b, idx));
  }
  return r;
}

enum class RefReduce { kSum, kMean, kMax, kMin };

inline Ref Reduce(const Ref& a, Index dims, bool keepdim, RefReduce op) {
  if (dims.empty()) {
    for (size_t d = 0; d < a.shape.size(); ++d) dims.push_back(static_cast<int64_t>(d));
  }
  for (int64_t& d : dims) d = d < 0 ? d + static_cast<int64_t>(a.shape.size()) : d;
  auto reduced = [&](size_t d) { return std::find(dims.begin(), dims.end(), d) != dims.end(); };
  Index kept_shape, out_shape;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    if (!reduced(d))
      out_shape.push_back(a.shape[d]);
    else if (keepdim)
      out_shape.push_back(1);
  }
  Ref r = Make(out_shape);
  std::vector<int64_t> count(r.numel(), 0);
  const double init = op == RefReduce::kMax   ? -std::numeric_limits<double>::infinity()
                      : op == RefReduce::kMin ? std::numeric_limits<double>::infinity()
                                              : 0.0;
  std::fill(r.v.begin(), r.v.end(), init);
  for (int64_t i = 0; i < a.numel(); ++i) {
    const Index idx = Unravel(i, a.shape);
    Index o;
    for (size_t d = 0; d < idx.size(); ++d) {
      if (!reduced(d))
        o.push_back(idx[d]);
      else if (keepdim)
        o.push_back(0);
    }
    const int64_t j = Ravel(o, out_shape);
    ++count[j];
    if (op == RefReduce::kMax)
      r.v[j] = std::max(r.v[j], a.v[i]);
    else if (op == RefReduce::kMin)
      r.v[j] = std::min(r.v[j], a.v[i]);
    else
      r.v[j] += a.v[i];
  }
  if (op == RefReduce::kMean) {
    for (int64_t j = 0; j < r.numel(); ++j) r.v[j] /= static_cast<double>(count[j]);
  }
  return r;
}

// Flat offset in `a` of the element a broadcast maps output index `out_idx` to.
inline int64_t BroadcastOffset(const Ref& a, const Index& out_idx) {
  int64_t flat = 0;
  const size_t lead = out_idx.size() - a.shape.size();
  for (size_t d = 0; d < a.shape.size(); ++d) {
    flat = flat * a.shape[d] + (a.shape[d] == 1 ? 0 : out_idx[lead + d]);
  }
  return flat;
}

// [..., m, k] x [..., k, n] with broadcast batch dims.
inline Ref Matmul(const Ref& a, const Ref& b) {
  const size_t ra = a.shape.size(), rb = b.shape.size();
  const int64_t m = a.shape[ra - 2], k = a.shape[ra - 1], n = b.shape[rb - 1];
  const Index batch =
      BroadcastShape(Index(a.shape.begin(), a.shape.end() - 2), Index(b.shape.begin(), b.shape.end() - 2));
  Index out_shape = batch;
  out_shape.push_back(m);
  out_shape.push_back(n);
  Ref r = Make(out_shape);
  for (int64_t i = 0; i < r.numel(); ++i) {
    Index idx = Unravel(i, out_shape);
    const int64_t row = idx[idx.size() - 2], col = idx[idx.size() - 1];
    Index ia = idx, ib = idx;
    ia[ia.size() - 2] = row, ia[ia.size() - 1] = 0;
    ib[ib.size() - 2] = 0, ib[ib.size() - 1] = col;
    const int64_t a0 = BroadcastOffset(a, ia), b0 = BroadcastOffset(b, ib);
    double acc = 0;
    for (int64_t p = 0; p < k; ++p) acc += a.v[a0 + p] * b.v[b0 + p * n];
    r.v[i] = acc;
  }
  return r;
}

inline Ref Permute(const Ref& a, const Index& perm) {
  Index shape(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) shape[d] = a.shape[perm[d]];
  Ref r = Make(shape);
  for (int64_t i = 0; i < r.numel(); ++i) {
    const Index idx = Unravel(i, shape);
    Index src(perm.size());
    for (size_t d = 0; d < perm.size(); ++d) src[perm[d]] = idx[d];
    r.v[i] = a.v[Ravel(src, a.shape)];
  }
  return r;
}

// Elements start, start+step, ... < end along dim (already clamped).
inline Ref Slice(const Ref& a, int64_t dim, int64_t start, int64_t end, int64_t step) {
  Index shape = a.shape;
  shape[dim] = end > start ? (end - start + step - 1) / step : 0;
  Ref r = Make(shape);
  for (int64_t i = 0; i < r.numel(); ++i) {
    Index idx = Unravel(i, shape);
    idx[dim] = start + idx[dim] * step;
    r.v[i] = a.v[Ravel(idx, a.shape)];
  }
  return r;
}

inline Ref Softmax(const Ref& a, int64_t dim, bool log) {
  Ref r = a;
  const Ref m = Reduce(a, {dim}, true, RefReduce::kMax);
  Ref e = Zip(a, m, [](double x, double y) { return std::exp(x - y); });
  const Ref s = Reduce(e, {dim}, true, RefReduce::kSum);
  if (log) {
    Ref shifted = Zip(a, m, [](double x, double y) { return x - y; });
    return Zip(shifted, s, [](double x, double y) { return x - std::log(y); });
  }
  return Zip(e, s, [](double x, double y) { return x / y; });
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_TENSOR_REFERENCE_H_
