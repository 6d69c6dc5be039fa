// Autodiff<B>'s recorded ops whose backward steps take more than a line: the derivative of
// each element-wise op, reductions, matmul, slice and cat. Included by autodiff.h only.
#ifndef KILN_AUTODIFF_AUTODIFF_OPS_H_
#define KILN_AUTODIFF_AUTODIFF_OPS_H_

namespace kiln {

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::unary(UnaryOp op, const Primitive& x) {
  P y = B::unary(op, x.value);
  if (!IsFloating(dtype(x))) return {std::move(y), nullptr};
  const P xv = x.value;
  const P yv = y;
  return Record(std::move(y), {x}, [op, xv, yv](const P& g, uint32_t) -> Grads {
    switch (op) {
      case UnaryOp::kNeg: return {Neg(g)};
      case UnaryOp::kAbs: {  // sign(x), 0 at 0
        const P pos = B::cast(B::binary(BinaryOp::kGt, xv, Zero(xv)), B::dtype(xv));
        const P neg = B::cast(B::binary(BinaryOp::kLt, xv, Zero(xv)), B::dtype(xv));
        return {Mul(g, Sub(pos, neg))};
      }
      case UnaryOp::kExp: return {Mul(g, yv)};
      case UnaryOp::kLog: return {Div(g, xv)};
      case UnaryOp::kSqrt: return {Div(Mul(g, Const(0.5, g)), yv)};
      case UnaryOp::kTanh: return {Mul(g, Sub(Const(1, yv), Mul(yv, yv)))};
      case UnaryOp::kSigmoid: return {Mul(g, Mul(yv, Sub(Const(1, yv), yv)))};
      case UnaryOp::kRelu: return {B::where(B::binary(BinaryOp::kGt, xv, Zero(xv)), g, Zero(g))};
      case UnaryOp::kErf:  // 2 / sqrt(pi) exp(-x^2)
        return {Mul(g, Mul(Const(1.1283791670955126, xv), B::unary(UnaryOp::kExp, Neg(Mul(xv, xv)))))};
    }
    return {std::nullopt};
  });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::binary(BinaryOp op, const Primitive& a, const Primitive& b) {
  P out = B::binary(op, a.value, b.value);
  if (IsComparison(op) || !IsFloating(dtype(a))) return {std::move(out), nullptr};
  const P av = a.value, bv = b.value, ov = out;
  const Shape sa = shape(a), sb = shape(b);
  return Record(std::move(out), {a, b}, [=](const P& g, uint32_t needs) -> Grads {
    Grads grads(2);
    auto give = [&](int i, auto&& make) {
      if (Needs(needs, i)) grads[i] = Unbroadcast(make(), i == 0 ? sa : sb);
    };
    switch (op) {
      case BinaryOp::kAdd:
        give(0, [&] { return g; });
        give(1, [&] { return g; });
        break;
      case BinaryOp::kSub:
        give(0, [&] { return g; });
        give(1, [&] { return Neg(g); });
        break;
      case BinaryOp::kMul:
        give(0, [&] { return Mul(g, bv); });
        give(1, [&] { return Mul(g, av); });
        break;
      case BinaryOp::kDiv:  // d(a/b)/db = -(a/b)/b
        give(0, [&] { return Div(g, bv); });
        give(1, [&] { return Neg(Div(Mul(g, ov), bv)); });
        break;
      case BinaryOp::kPow:  // b a^(b-1), and a^b log(a)
        give(0, [&] { return Mul(g, Mul(bv, B::binary(BinaryOp::kPow, av, Sub(bv, Const(1, bv))))); });
        give(1, [&] { return Mul(g, Mul(ov, B::unary(UnaryOp::kLog, av))); });
        break;
      case BinaryOp::kMaximum:
      case BinaryOp::kMinimum: {  // the gradient goes to the chosen operand (a on ties)
        const P take_a = B::binary(op == BinaryOp::kMaximum ? BinaryOp::kGe : BinaryOp::kLe, av, bv);
        give(0, [&] { return B::where(take_a, g, Zero(g)); });
        give(1, [&] { return B::where(take_a, Zero(g), g); });
        break;
      }
      default: break;
    }
    return grads;
  });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::where(const Primitive& cond, const Primitive& a, const Primitive& b) {
  P out = B::where(cond.value, a.value, b.value);
  if (!IsFloating(dtype(a))) return {std::move(out), nullptr};
  const P c = cond.value;
  const Shape sa = shape(a), sb = shape(b);
  return Record(std::move(out), {a, b}, [c, sa, sb](const P& g, uint32_t needs) -> Grads {
    Grads grads(2);
    if (Needs(needs, 0)) grads[0] = Unbroadcast(B::where(c, g, Zero(g)), sa);
    if (Needs(needs, 1)) grads[1] = Unbroadcast(B::where(c, Zero(g), g), sb);
    return grads;
  });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::reduce(ReduceOp op, const Primitive& x, absl::Span<const int64_t> dims,
                                                    bool keepdim) {
  P out = B::reduce(op, x.value, dims, keepdim);
  if (!IsFloating(dtype(x))) return {std::move(out), nullptr};
  const Shape in = shape(x);
  const Shape kept = ReducedShape(in, dims, true);
  const Dims reduced(dims.begin(), dims.end());
  int64_t count = 1;
  for (int64_t d : dims) count *= in[d];
  const P xv = x.value, ov = out;
  return Record(std::move(out), {x}, [=](const P& g, uint32_t) -> Grads {
    const P spread = B::expand(B::reshape(g, kept), in);
    switch (op) {
      case ReduceOp::kSum: return {spread};
      case ReduceOp::kMean: return {Div(spread, Const(count, g))};
      case ReduceOp::kMax:
      case ReduceOp::kMin: {  // shared evenly between tied extremes
        const P hit = B::cast(B::binary(BinaryOp::kEq, xv, B::reshape(ov, kept)), B::dtype(xv));
        const P ties = B::reduce(ReduceOp::kSum, hit, reduced, true);
        return {Mul(spread, Div(hit, ties))};
      }
    }
    return {std::nullopt};
  });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::matmul(const Primitive& a, const Primitive& b) {
  const P av = a.value, bv = b.value;
  const Shape sa = shape(a), sb = shape(b);
  // For an operand that is a transposed view, its gradient is computed transposed (same
  // GEMM, other order) and handed back as a view, which the view's own backward undoes.
  const bool a_swapped = a.node != nullptr && a.node->swaps_last_two;
  const bool b_swapped = b.node != nullptr && b.node->swaps_last_two;
  return Record(B::matmul(av, bv), {a, b}, [=](const P& g, uint32_t needs) -> Grads {
    Grads grads(2);
    const Dims ta = SwapLast(sa.rank()), tb = SwapLast(sb.rank()), tg = SwapLast(B::shape(g).rank());
    if (Needs(needs, 0)) {  // g b^T, or (b g^T)^T
      grads[0] = Unbroadcast(
          a_swapped ? B::permute(B::matmul(bv, B::permute(g, tg)), tg) : B::matmul(g, B::permute(bv, tb)), sa);
    }
    if (Needs(needs, 1)) {  // a^T g, or (g^T a)^T
      grads[1] = Unbroadcast(
          b_swapped ? B::permute(B::matmul(B::permute(g, tg), av), tg) : B::matmul(B::permute(av, ta), g), sb);
    }
    return grads;
  });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::slice(const Primitive& x, int64_t dim, int64_t start, int64_t end,
                                                   int64_t step) {
  const Shape in = shape(x);
  const Device dev = device(x);
  return Record(B::slice(x.value, dim, start, end, step), {x}, [=](const P& g, uint32_t) -> Grads {
    // The positions the slice took along dim, as an index for scatter_add.
    const int64_t n = B::shape(g)[dim];
    TensorData positions(Shape{n}, DType::kI64);
    auto v = positions.mutable_values<int64_t>();
    for (int64_t i = 0; i < n; ++i) v[i] = start + i * step;
    return {B::scatter_add(g, dim, AlongDim(B::from_data(positions, dev), dim, B::shape(g)), in)};
  });
}

template <Backend B>
typename Autodiff<B>::Primitive Autodiff<B>::cat(absl::Span<const Primitive> parts, int64_t dim) {
  std::vector<P> values;
  std::vector<int64_t> sizes;
  for (const auto& p : parts) {
    values.push_back(p.value);
    sizes.push_back(shape(p)[dim]);
  }
  return Record(B::cat(values, dim), parts, [dim, sizes](const P& g, uint32_t needs) -> Grads {
    Grads grads(sizes.size());
    int64_t at = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (Needs(needs, static_cast<int>(i))) grads[i] = B::slice(g, dim, at, at + sizes[i], 1);
      at += sizes[i];
    }
    return grads;
  });
}

}  // namespace kiln

#endif  // KILN_AUTODIFF_AUTODIFF_OPS_H_
