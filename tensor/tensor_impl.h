// Out-of-class definitions of Tensor<B>'s larger methods (argument checks, then one backend
// call). Included by tensor.h only.
#ifndef KILN_TENSOR_TENSOR_IMPL_H_
#define KILN_TENSOR_TENSOR_IMPL_H_

#include <algorithm>
#include <numeric>

namespace kiln {

template <Backend B>
Tensor<B> Tensor<B>::arange(double start, double end, double step, DType dtype, const Device& device) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(end) || !std::isfinite(step)) {
    ThrowInvalidArgument("arange(%g, %g, %g): bounds and step must be finite, step non-zero", start, end, step);
  }
  const double count = std::max(0.0, std::ceil((end - start) / step));
  if (count > 1e12) ThrowInvalidArgument("arange(%g, %g, %g): too many elements", start, end, step);
  TensorData data(Shape{static_cast<int64_t>(count)}, dtype);
  VisitDType(dtype, [&](auto v) {
    using T = decltype(v);
    auto out = data.mutable_values<T>();
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = Scalar(start + static_cast<double>(i) * step).template as<T>();
    }
  });
  return from_data(data, device);
}

template <Backend B>
Tensor<B> Tensor<B>::reduce(ReduceOp op, absl::Span<const int64_t> dims, bool keepdim) const {
  const char* name = OpName(op);
  if (dtype() == DType::kBool) {
    return to(op == ReduceOp::kMean ? DType::kF32 : DType::kI64).reduce(op, dims, keepdim);
  }
  if (rank() == 0) {
    if (!dims.empty()) NormalizeDim(dims[0], 0, shape(), name);  // throws: a scalar has no dims
    return *this;
  }
  const Dims sorted = NormalizeReduceDims(dims, shape(), name);
  if (op == ReduceOp::kMax || op == ReduceOp::kMin) {
    for (int64_t d : sorted) {
      if (shape()[d] == 0) {
        ThrowInvalidArgument("%s: dim %d of %s is empty; there is no %s of nothing", name, d, Describe(), name);
      }
    }
  }
  return Tensor(B::reduce(op, p_, sorted, keepdim));
}

template <Backend B>
Tensor<B> Tensor<B>::argmax(int64_t dim, bool keepdim) const {
  const int64_t d = NormalizeDim(dim, rank(), shape(), "argmax");
  if (shape()[d] == 0) ThrowInvalidArgument("argmax: dim %d of %s is empty", d, Describe());
  if (dtype() == DType::kBool) return to(DType::kI32).argmax(d, keepdim);
  return Tensor(B::argmax(p_, d, keepdim));
}

namespace fused {
template <Backend B>
Tensor<B> softmax_last(const Tensor<B>& x, bool log, bool causal);  // tensor/fused.h
}  // namespace fused

namespace internal {
// softmax (log: log-softmax) along `dim` from plain ops.
template <Backend B>
Tensor<B> ComposedSoftmax(const Tensor<B>& x, int64_t dim, bool log) {
  const Tensor<B> shifted = x - x.max({dim}, true).detach();
  if (log) return shifted - shifted.exp().sum({dim}, true).log();
  const Tensor<B> e = shifted.exp();
  return e / e.sum({dim}, true);
}
}  // namespace internal

template <Backend B>
Tensor<B> Tensor<B>::Softmax(int64_t dim, bool log) const {
  if (IsFloating(dtype()) && rank() >= 1 && NormalizeDim(dim, rank(), shape(), "softmax") == rank() - 1) {
    return fused::softmax_last(*this, log, false);
  }
  return internal::ComposedSoftmax(*this, dim, log);
}

template <Backend B>
Tensor<B> Tensor<B>::matmul(const Tensor& o) const {
  CheckSameDevice("matmul", o);
  if (dtype() != o.dtype() || !IsFloating(dtype())) {
    ThrowInvalidArgument("matmul: needs two tensors of one floating dtype, got %s and %s", Describe(), o.Describe());
  }
  if (rank() == 0 || o.rank() == 0) {
    ThrowInvalidArgument("matmul: needs rank >= 1, got %s and %s", Describe(), o.Describe());
  }
  const bool vector_a = rank() == 1, vector_b = o.rank() == 1;
  const Tensor a = vector_a ? unsqueeze(0) : *this;
  const Tensor b = vector_b ? o.unsqueeze(1) : o;
  const MatmulShapes shapes = MatmulShape(a.shape(), b.shape());
  if (!shapes.out) {
    ThrowInvalidArgument("matmul: %s; got %s and %s", shapes.problem, Describe(), o.Describe());
  }
  Tensor out;
  if (a.rank() > 2 && b.rank() == 2) {
    // [..., m, k] x [k, n] is one [(...m), k] x [k, n] GEMM: one large product instead of a
    // batch of small ones, and the weight's gradient comes out summed, not per batch.
    out = Tensor(B::matmul(B::reshape(a.p_, Shape({a.numel() / a.size(-1), a.size(-1)})), b.p_))
              .reshape(shapes.out->dims());
  } else {
    out = Tensor(B::matmul(a.p_, b.p_));
  }
  if (vector_b) out = out.squeeze(-1);
  if (vector_a) out = out.squeeze(vector_b ? -1 : -2);
  return out;
}

template <Backend B>
Tensor<B> Tensor<B>::permute(absl::Span<const int64_t> dims) const {
  if (static_cast<int64_t>(dims.size()) != rank()) {
    ThrowInvalidArgument("permute: [%s] has %d dims but %s has rank %d", absl::StrJoin(dims, ","), dims.size(),
                         Describe(), rank());
  }
  Dims perm;
  std::vector<bool> seen(rank(), false);
  for (int64_t d : dims) {
    const int64_t n = NormalizeDim(d, rank(), shape(), "permute");
    if (seen[n]) {
      ThrowInvalidArgument("permute: [%s] names dim %d twice (%s)", absl::StrJoin(dims, ","), n, Describe());
    }
    seen[n] = true;
    perm.push_back(n);
  }
  bool identity = true;
  for (int64_t i = 0; i < rank(); ++i) identity = identity && perm[i] == i;
  return identity ? *this : Tensor(B::permute(p_, perm));
}

template <Backend B>
Tensor<B> Tensor<B>::transpose(int64_t dim0, int64_t dim1) const {
  const int64_t a = NormalizeDim(dim0, rank(), shape(), "transpose");
  const int64_t b = NormalizeDim(dim1, rank(), shape(), "transpose");
  Dims perm(rank());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[a], perm[b]);
  return permute(perm);
}

template <Backend B>
Tensor<B> Tensor<B>::unsqueeze(int64_t dim) const {
  const int64_t d = NormalizeDim(dim, rank() + 1, shape(), "unsqueeze");
  Dims dims(shape().dims().begin(), shape().dims().end());
  dims.insert(dims.begin() + d, 1);
  return Tensor(B::reshape(p_, Shape(dims)));
}

template <Backend B>
Tensor<B> Tensor<B>::squeeze(int64_t dim) const {
  const int64_t d = NormalizeDim(dim, rank(), shape(), "squeeze");
  if (shape()[d] != 1) {
    ThrowInvalidArgument("squeeze: dim %d of %s has size %d, not 1", d, Describe(), shape()[d]);
  }
  Dims dims(shape().dims().begin(), shape().dims().end());
  dims.erase(dims.begin() + d);
  return Tensor(B::reshape(p_, Shape(dims)));
}

template <Backend B>
Tensor<B> Tensor<B>::slice(int64_t dim, int64_t start, int64_t end, int64_t step) const {
  const int64_t d = NormalizeDim(dim, rank(), shape(), "slice");
  if (step < 1) ThrowInvalidArgument("slice: step %d must be >= 1 (%s)", step, Describe());
  const int64_t size = shape()[d];
  auto clamp_index = [size](int64_t i) {
    if (i < 0) i += size;
    return std::clamp<int64_t>(i, 0, size);
  };
  const int64_t s = clamp_index(start);
  const int64_t e = std::max(s, clamp_index(end));
  if (s == 0 && e == size && step == 1) return *this;
  return Tensor(B::slice(p_, d, s, e, step));
}

template <Backend B>
Tensor<B> Tensor<B>::IndexAsI64(const Tensor& index, const char* what) const {
  CheckSameDevice(what, index);
  if (!IsInteger(index.dtype())) {
    ThrowInvalidArgument("%s: index must be an integer tensor, got %s (source %s)", what, index.Describe(), Describe());
  }
  return index.to(DType::kI64);
}

template <Backend B>
Tensor<B> Tensor<B>::gather(int64_t dim, const Tensor& index) const {
  const int64_t d = NormalizeDim(dim, rank(), shape(), "gather");
  const Tensor idx = IndexAsI64(index, "gather");
  bool fits = idx.rank() == rank();
  for (int64_t i = 0; fits && i < rank(); ++i) fits = i == d || idx.shape()[i] <= shape()[i];
  if (!fits) {
    ThrowInvalidArgument(
        "gather: index %s must have the rank of %s and be no larger in any dim "
        "but %d",
        index.Describe(), Describe(), d);
  }
  return Tensor(B::gather(p_, d, idx.p_));
}

template <Backend B>
Tensor<B> Tensor<B>::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  const int64_t d = NormalizeDim(dim, rank(), shape(), "scatter_add");
  CheckSameDevice("scatter_add", src);
  const Tensor idx = IndexAsI64(index, "scatter_add");
  bool fits = idx.shape() == src.shape() && src.rank() == rank() && src.dtype() == dtype();
  for (int64_t i = 0; fits && i < rank(); ++i) fits = i == d || src.shape()[i] <= shape()[i];
  if (!fits || dtype() == DType::kBool) {
    ThrowInvalidArgument(
        "scatter_add: src %s and index %s must have one shape, the dtype and "
        "rank of %s, and be no larger in any dim but %d",
        src.Describe(), index.Describe(), Describe(), d);
  }
  return *this + Tensor(B::scatter_add(src.p_, d, idx.p_, shape()));
}

template <Backend B>
Tensor<B> Tensor<B>::index_select(int64_t dim, const Tensor& index) const {
  const int64_t d = NormalizeDim(dim, rank(), shape(), "index_select");
  const Tensor idx = IndexAsI64(index, "index_select");
  if (idx.rank() != 1) {
    ThrowInvalidArgument("index_select: index must be 1-D, got %s (source %s)", index.Describe(), Describe());
  }
  return Tensor(B::index_select(p_, d, idx.p_));
}

template <Backend B>
Tensor<B> Tensor<B>::one_hot(int64_t num_classes, DType dtype) const {
  if (!IsInteger(this->dtype())) {
    ThrowInvalidArgument("one_hot: needs integer class ids, got %s", Describe());
  }
  if (num_classes < 1) ThrowInvalidArgument("one_hot: num_classes %d must be >= 1", num_classes);
  const Tensor ids = to(DType::kI64);
  if (numel() > 0) {
    const int64_t lo = ids.min().template item<int64_t>();
    const int64_t hi = ids.max().template item<int64_t>();
    if (lo < 0 || hi >= num_classes) {
      ThrowOutOfRange("one_hot: class id %d is outside [0, %d) in %s", lo < 0 ? lo : hi, num_classes, Describe());
    }
  }
  return ids.unsqueeze(-1).eq(arange(num_classes, DType::kI64, device())).to(dtype);
}

template <Backend B>
Tensor<B> Tensor<B>::cat(absl::Span<const Tensor> tensors, int64_t dim) {
  if (tensors.empty()) ThrowInvalidArgument("cat: needs at least one tensor");
  const Tensor& first = tensors[0];
  const int64_t d = NormalizeDim(dim, first.rank(), first.shape(), "cat");
  std::vector<Primitive> prims;
  prims.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    first.CheckSameDevice("cat", t);
    bool same = t.dtype() == first.dtype() && t.rank() == first.rank();
    for (int64_t k = 0; same && k < t.rank(); ++k) same = k == d || t.shape()[k] == first.shape()[k];
    if (!same) {
      ThrowInvalidArgument(
          "cat along dim %d: tensor %d is %s but tensor 0 is %s; they must "
          "match in dtype and in every other dim",
          d, i, t.Describe(), first.Describe());
    }
    prims.push_back(t.p_);
  }
  if (tensors.size() == 1) return first;
  return Tensor(B::cat(prims, d));
}

template <Backend B>
Tensor<B> Tensor<B>::stack(absl::Span<const Tensor> tensors, int64_t dim) {
  if (tensors.empty()) ThrowInvalidArgument("stack: needs at least one tensor");
  const int64_t d = NormalizeDim(dim, tensors[0].rank() + 1, tensors[0].shape(), "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].shape() != tensors[0].shape()) {
      ThrowInvalidArgument("stack: tensor %d is %s but tensor 0 is %s; shapes must be equal", i, tensors[i].Describe(),
                           tensors[0].Describe());
    }
    parts.push_back(tensors[i].unsqueeze(d));
  }
  return cat(parts, d);
}

template <Backend B>
Tensor<B> Tensor<B>::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  a.CheckSameDevice("where", b);
  a.CheckSameDevice("where", cond);
  if (cond.dtype() != DType::kBool) {
    ThrowInvalidArgument("where: condition must be bool, got %s", cond.Describe());
  }
  if (a.dtype() != b.dtype()) {
    ThrowInvalidArgument("where: dtypes differ: %s and %s", a.Describe(), b.Describe());
  }
  const auto ab = BroadcastShapes(a.shape(), b.shape());
  if (!ab || !BroadcastShapes(*ab, cond.shape())) {
    ThrowInvalidArgument("where: shapes do not broadcast: condition %s, %s and %s", cond.Describe(), a.Describe(),
                         b.Describe());
  }
  return Tensor(B::where(cond.p_, a.p_, b.p_));
}

}  // namespace kiln

#endif  // KILN_TENSOR_TENSOR_IMPL_H_
