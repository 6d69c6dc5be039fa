// Tensor<B>: the tensor users hold, for any backend B. Immutable values: every op returns a
// new tensor (views may share storage, which is safe because nothing writes in place).
// Every argument is checked here, once for all backends; bad input throws kiln::Error whose
// message names the operands (dtype, shape, device).
#ifndef KILN_TENSOR_TENSOR_H_
#define KILN_TENSOR_TENSOR_H_

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "tensor/backend.h"
#include "tensor/error.h"
#include "tensor/random.h"
#include "tensor/shape_rules.h"

namespace kiln {

template <Backend B>
class Tensor {
 public:
  using Backend = B;
  using Device = typename B::Device;
  using Primitive = typename B::Primitive;

  Tensor() = default;  // an empty f32 tensor of shape [0] on no particular device
  explicit Tensor(Primitive p) : p_(std::move(p)) {}

  // ---- Creation ---------------------------------------------------------------------------
  static Tensor from_data(const TensorData& data, const Device& device = Device{}) {
    return Tensor(B::from_data(data, device));
  }
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape, const Device& device = Device{}) {
    return from_data(TensorData::FromVector(values, std::move(shape)), device);
  }
  static Tensor full(Shape shape, Scalar value, DType dtype = DType::kF32, const Device& device = Device{}) {
    return Tensor(B::full(shape, value, dtype, device));
  }
  static Tensor zeros(Shape shape, DType dtype = DType::kF32, const Device& device = Device{}) {
    return full(std::move(shape), 0, dtype, device);
  }
  static Tensor ones(Shape shape, DType dtype = DType::kF32, const Device& device = Device{}) {
    return full(std::move(shape), 1, dtype, device);
  }
  // start, start+step, ... while < end (> end for a negative step).
  static Tensor arange(double start, double end, double step = 1, DType dtype = DType::kF32,
                       const Device& device = Device{});
  static Tensor arange(int64_t end, DType dtype = DType::kI64, const Device& device = Device{}) {
    return arange(0, static_cast<double>(end), 1, dtype, device);
  }
  // Drawn on the host from `gen`, so a seed gives the same numbers on every backend.
  static Tensor uniform(Shape shape, double low, double high, Generator& gen, DType dtype = DType::kF32,
                        const Device& device = Device{}) {
    return from_data(RandomUniform(shape, dtype, low, high, gen), device);
  }
  static Tensor normal(Shape shape, double mean, double stddev, Generator& gen, DType dtype = DType::kF32,
                       const Device& device = Device{}) {
    return from_data(RandomNormal(shape, dtype, mean, stddev, gen), device);
  }

  // ---- Metadata ---------------------------------------------------------------------------
  const Shape& shape() const { return B::shape(p_); }
  int64_t rank() const { return shape().rank(); }
  int64_t numel() const { return shape().numel(); }
  int64_t size(int64_t dim) const { return shape()[NormalizeDim(dim, rank(), shape(), "size")]; }
  DType dtype() const { return B::dtype(p_); }
  Device device() const { return B::device(p_); }
  const Primitive& primitive() const { return p_; }
  // "f32[2,3] on cpu:0": how error messages name an operand.
  std::string Describe() const {
    return absl::StrCat(DTypeName(dtype()), shape().ToString(), " on ", device().ToString());
  }

  // ---- Moving data ------------------------------------------------------------------------
  TensorData to_data() const { return B::to_data(p_); }
  Tensor to(const Device& device) const { return device == this->device() ? *this : Tensor(B::to_device(p_, device)); }
  Tensor to(DType dtype) const { return dtype == this->dtype() ? *this : Tensor(B::cast(p_, dtype)); }
  // The single element of a one-element tensor.
  template <class T>
  T item() const {
    if (numel() != 1) ThrowInvalidArgument("item: %s has %d elements, not 1", Describe(), numel());
    const TensorData data = to_data();
    // Exact for integers (no trip through double); saturating, NaN -> 0, for float -> int.
    switch (data.dtype()) {
      case DType::kI32: return Scalar(data.template values<int32_t>()[0]).template as<T>();
      case DType::kI64: return Scalar(data.template values<int64_t>()[0]).template as<T>();
      default: return Scalar(data.AsDouble(0)).template as<T>();
    }
  }
  std::string ToString() const { return absl::StrCat(to_data().ToString(), " on ", device().ToString()); }

  // ---- Element-wise -----------------------------------------------------------------------
  Tensor neg() const { return unary(UnaryOp::kNeg); }
  Tensor abs() const { return unary(UnaryOp::kAbs); }
  Tensor exp() const { return unary(UnaryOp::kExp); }
  Tensor log() const { return unary(UnaryOp::kLog); }
  Tensor sqrt() const { return unary(UnaryOp::kSqrt); }
  Tensor tanh() const { return unary(UnaryOp::kTanh); }
  Tensor sigmoid() const { return unary(UnaryOp::kSigmoid); }
  Tensor relu() const { return unary(UnaryOp::kRelu); }
  Tensor erf() const { return unary(UnaryOp::kErf); }
  Tensor pow(Scalar exponent) const { return binary(BinaryOp::kPow, exponent); }
  Tensor pow(const Tensor& exponent) const { return binary(BinaryOp::kPow, exponent); }
  Tensor maximum(const Tensor& o) const { return binary(BinaryOp::kMaximum, o); }
  Tensor minimum(const Tensor& o) const { return binary(BinaryOp::kMinimum, o); }
  Tensor clamp(Scalar low, Scalar high) const {
    if (low.to_double() > high.to_double()) {
      ThrowInvalidArgument("clamp: low %s is greater than high %s (tensor %s)", low.ToString(), high.ToString(),
                           Describe());
    }
    return binary(BinaryOp::kMaximum, low).binary(BinaryOp::kMinimum, high);
  }
  Tensor eq(const Tensor& o) const { return binary(BinaryOp::kEq, o); }
  Tensor ne(const Tensor& o) const { return binary(BinaryOp::kNe, o); }
  Tensor lt(const Tensor& o) const { return binary(BinaryOp::kLt, o); }
  Tensor le(const Tensor& o) const { return binary(BinaryOp::kLe, o); }
  Tensor gt(const Tensor& o) const { return binary(BinaryOp::kGt, o); }
  Tensor ge(const Tensor& o) const { return binary(BinaryOp::kGe, o); }
  Tensor eq(Scalar v) const { return binary(BinaryOp::kEq, v); }
  Tensor ne(Scalar v) const { return binary(BinaryOp::kNe, v); }
  Tensor lt(Scalar v) const { return binary(BinaryOp::kLt, v); }
  Tensor le(Scalar v) const { return binary(BinaryOp::kLe, v); }
  Tensor gt(Scalar v) const { return binary(BinaryOp::kGt, v); }
  Tensor ge(Scalar v) const { return binary(BinaryOp::kGe, v); }
  // Elements where `mask` (bool, broadcast to this shape) is true become `value`.
  Tensor masked_fill(const Tensor& mask, Scalar value) const {
    return where(mask, scalar_like(value, "masked_fill"), *this);
  }

  Tensor binary(BinaryOp op, const Tensor& o) const {
    CheckSameDevice(OpName(op), o);
    if (dtype() != o.dtype()) {
      ThrowInvalidArgument("%s: dtypes differ: %s and %s; convert one with .to(DType)", OpName(op), Describe(),
                           o.Describe());
    }
    if (dtype() == DType::kBool && !IsComparison(op)) {
      ThrowInvalidArgument("%s: arithmetic on bool tensors (%s and %s); convert with .to(DType)", OpName(op),
                           Describe(), o.Describe());
    }
    if (op == BinaryOp::kPow && !IsFloating(dtype())) {
      ThrowInvalidArgument("pow: needs a floating dtype, got %s and %s", Describe(), o.Describe());
    }
    if (!BroadcastShapes(shape(), o.shape())) {
      ThrowInvalidArgument("%s: shapes do not broadcast: %s and %s", OpName(op), Describe(), o.Describe());
    }
    return Tensor(B::binary(op, p_, o.p_));
  }
  Tensor binary(BinaryOp op, Scalar v) const { return binary(op, scalar_like(v, OpName(op))); }

  // ---- Reductions -------------------------------------------------------------------------
  // With no dims, over every dim. Sum of bool counts (i64); mean of bool is a fraction (f32).
  Tensor sum(absl::Span<const int64_t> dims = {}, bool keepdim = false) const {
    return reduce(ReduceOp::kSum, dims, keepdim);
  }
  Tensor mean(absl::Span<const int64_t> dims = {}, bool keepdim = false) const {
    return reduce(ReduceOp::kMean, dims, keepdim);
  }
  Tensor max(absl::Span<const int64_t> dims = {}, bool keepdim = false) const {
    return reduce(ReduceOp::kMax, dims, keepdim);
  }
  Tensor min(absl::Span<const int64_t> dims = {}, bool keepdim = false) const {
    return reduce(ReduceOp::kMin, dims, keepdim);
  }
  Tensor sum(std::initializer_list<int64_t> dims, bool keepdim = false) const {
    return sum(absl::MakeConstSpan(dims.begin(), dims.size()), keepdim);
  }
  Tensor mean(std::initializer_list<int64_t> dims, bool keepdim = false) const {
    return mean(absl::MakeConstSpan(dims.begin(), dims.size()), keepdim);
  }
  Tensor max(std::initializer_list<int64_t> dims, bool keepdim = false) const {
    return max(absl::MakeConstSpan(dims.begin(), dims.size()), keepdim);
  }
  Tensor min(std::initializer_list<int64_t> dims, bool keepdim = false) const {
    return min(absl::MakeConstSpan(dims.begin(), dims.size()), keepdim);
  }
  Tensor reduce(ReduceOp op, absl::Span<const int64_t> dims, bool keepdim) const;
  // Index (i64) of the first largest element along `dim`; argmax() is over the flattened tensor.
  Tensor argmax(int64_t dim, bool keepdim = false) const;
  Tensor argmax() const { return reshape({-1}).argmax(0); }
  // Numerically stable: the maximum along `dim` is subtracted first. Over the last dim, B's
  // fused kernel where it has one (tensor/fused.h).
  Tensor softmax(int64_t dim) const { return Softmax(dim, false); }
  Tensor log_softmax(int64_t dim) const { return Softmax(dim, true); }

  // ---- Linear algebra and layout ----------------------------------------------------------
  // NumPy rules: 1-D operands become a row (left) or a column (right) and that dim is dropped.
  Tensor matmul(const Tensor& o) const;
  Tensor reshape(absl::Span<const int64_t> dims) const {
    const Shape to = InferReshape(shape(), dims);
    return to == shape() ? *this : Tensor(B::reshape(p_, to));
  }
  Tensor reshape(std::initializer_list<int64_t> dims) const {
    return reshape(absl::MakeConstSpan(dims.begin(), dims.size()));
  }
  Tensor permute(absl::Span<const int64_t> dims) const;
  Tensor permute(std::initializer_list<int64_t> dims) const {
    return permute(absl::MakeConstSpan(dims.begin(), dims.size()));
  }
  Tensor transpose(int64_t dim0, int64_t dim1) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor squeeze(int64_t dim) const;
  Tensor expand(const Shape& to) const {
    if (!BroadcastsTo(shape(), to)) {
      ThrowInvalidArgument("expand: %s cannot be broadcast to %s", Describe(), to.ToString());
    }
    return to == shape() ? *this : Tensor(B::expand(p_, to));
  }
  // Python-style: negative indices count from the end, and bounds are clamped to the size.
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  // Along `dim`, index (integer, same rank; no larger than this tensor in other dims) picks
  // out[i][j] = this[index[i][j]][j] (for dim 0).
  Tensor gather(int64_t dim, const Tensor& index) const;
  // The entries of 1-D integer `index` along `dim`.
  Tensor index_select(int64_t dim, const Tensor& index) const;
  // This tensor plus src[pos] added at pos with its `dim` coordinate replaced by index[pos]
  // (index: integer, src's shape). The adjoint of gather.
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  // One-hot rows for an integer tensor of class ids in [0, num_classes).
  Tensor one_hot(int64_t num_classes, DType dtype = DType::kF32) const;

  static Tensor cat(absl::Span<const Tensor> tensors, int64_t dim);
  static Tensor stack(absl::Span<const Tensor> tensors, int64_t dim);
  // cond (bool) ? a : b, all three broadcast together.
  static Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

  // ---- Gradients: for backends that record them, i.e. Tensor<Autodiff<B>> -----------------
  // The same value with no gradient history (for other backends, the tensor itself).
  Tensor detach() const {
    if constexpr (requires { B::detach(p_); })
      return Tensor(B::detach(p_));
    else
      return *this;
  }
  // A leaf whose gradient backward() will compute (floating dtypes only).
  template <class X = B>
  requires requires(const typename X::Primitive& p) { X::require_grad(p); }
  Tensor require_grad() const { return Tensor(X::require_grad(p_)); }
  template <class X = B>
  requires requires(const typename X::Primitive& p) { X::requires_grad(p); }
  bool requires_grad() const { return X::requires_grad(p_); }
  // Gradients of every leaf this single-element tensor depends on. The graph is freed.
  template <class X = B>
  requires requires(const typename X::Primitive& p) { X::backward(p); }
  typename X::Gradients backward() const { return X::backward(p_); }
  // The same from a tensor of any shape, given d(loss)/d(this) as `seed`.
  template <class X = B>
  requires requires { typename X::Inner; }
  typename X::Gradients backward(const Tensor<typename X::Inner>& seed) const {
    return X::backward(p_, seed.primitive());
  }
  // The value as a tensor of the wrapped backend, and back (with no history).
  template <class X = B>
  requires requires { typename X::Inner; }
  Tensor<typename X::Inner> inner() const { return Tensor<typename X::Inner>(X::inner(p_)); }
  template <class X = B>
  requires requires { typename X::Inner; }
  static Tensor from_inner(const Tensor<typename X::Inner>& t) { return Tensor(X::from_inner(t.primitive())); }
  // This leaf with a new value: same identity, so gradients and hooks stay attached.
  template <class X = B>
  requires requires { typename X::Inner; }
  Tensor with_value(const Tensor<typename X::Inner>& value) const {
    return Tensor(X::with_value(p_, value.primitive()));
  }
  // Calls hook(gradient) during backward, the moment this leaf's gradient is final. When the
  // hook takes the gradient, backward's result leaves it out.
  template <class F, class X = B>
  requires requires { typename X::Inner; }
  void register_hook(F hook, bool takes_gradient = false) const {
    X::register_hook(
        p_, [hook = std::move(hook)](const typename X::Inner::Primitive& g) { hook(Tensor<typename X::Inner>(g)); },
        takes_gradient);
  }

  // A rank-0 tensor of this dtype and device holding `v`; a fractional value for an integer
  // tensor is an error rather than a silent truncation.
  Tensor scalar_like(Scalar v, const char* what = "scalar") const {
    if (!IsFloating(dtype()) && !v.is_integer() && v.to_double() != std::trunc(v.to_double())) {
      ThrowInvalidArgument(
          "%s: scalar %s is not a whole number but the tensor is %s; convert "
          "the tensor with .to(DType::kF32)",
          what, v.ToString(), Describe());
    }
    return Tensor(B::full(Shape{}, v, dtype(), device()));
  }

 private:
  Tensor Softmax(int64_t dim, bool log) const;
  Tensor unary(UnaryOp op) const {
    if (NeedsFloating(op) && !IsFloating(dtype())) {
      ThrowInvalidArgument("%s: needs a floating dtype, got %s; convert with .to(DType::kF32)", OpName(op), Describe());
    }
    if (dtype() == DType::kBool) {
      ThrowInvalidArgument("%s: not defined for bool tensor %s", OpName(op), Describe());
    }
    return Tensor(B::unary(op, p_));
  }
  void CheckSameDevice(const char* what, const Tensor& o) const {
    if (!(device() == o.device())) {
      ThrowInvalidArgument(
          "%s: operands are on different devices: %s and %s; move one with "
          ".to(device)",
          what, Describe(), o.Describe());
    }
  }
  Tensor IndexAsI64(const Tensor& index, const char* what) const;

  Primitive p_;
};

// ---- Operators ----------------------------------------------------------------------------
template <Backend B>
Tensor<B> operator+(const Tensor<B>& a, const Tensor<B>& b) {
  return a.binary(BinaryOp::kAdd, b);
}
template <Backend B>
Tensor<B> operator-(const Tensor<B>& a, const Tensor<B>& b) {
  return a.binary(BinaryOp::kSub, b);
}
template <Backend B>
Tensor<B> operator*(const Tensor<B>& a, const Tensor<B>& b) {
  return a.binary(BinaryOp::kMul, b);
}
template <Backend B>
Tensor<B> operator/(const Tensor<B>& a, const Tensor<B>& b) {
  return a.binary(BinaryOp::kDiv, b);
}
template <Backend B>
Tensor<B> operator+(const Tensor<B>& a, Scalar b) {
  return a.binary(BinaryOp::kAdd, b);
}
template <Backend B>
Tensor<B> operator-(const Tensor<B>& a, Scalar b) {
  return a.binary(BinaryOp::kSub, b);
}
template <Backend B>
Tensor<B> operator*(const Tensor<B>& a, Scalar b) {
  return a.binary(BinaryOp::kMul, b);
}
template <Backend B>
Tensor<B> operator/(const Tensor<B>& a, Scalar b) {
  return a.binary(BinaryOp::kDiv, b);
}
template <Backend B>
Tensor<B> operator+(Scalar a, const Tensor<B>& b) {
  return b.binary(BinaryOp::kAdd, a);
}
template <Backend B>
Tensor<B> operator*(Scalar a, const Tensor<B>& b) {
  return b.binary(BinaryOp::kMul, a);
}
template <Backend B>
Tensor<B> operator-(Scalar a, const Tensor<B>& b) {
  return b.neg().binary(BinaryOp::kAdd, a);
}
template <Backend B>
Tensor<B> operator/(Scalar a, const Tensor<B>& b) {
  return b.scalar_like(a, "div").binary(BinaryOp::kDiv, b);
}
template <Backend B>
Tensor<B> operator-(const Tensor<B>& a) {
  return a.neg();
}

}  // namespace kiln

#include "tensor/tensor_impl.h"  // IWYU pragma: export
// After the definitions above, which it uses.
#include "tensor/fused.h"  // IWYU pragma: export

#endif  // KILN_TENSOR_TENSOR_H_
