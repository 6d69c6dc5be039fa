// A finite-difference gradient checker in f64: analytic gradients from backward() against
// central differences of the same function, for every element of every input.
#ifndef KILN_TESTS_AUTODIFF_GRADCHECK_H_
#define KILN_TESTS_AUTODIFF_GRADCHECK_H_

#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "autodiff/autodiff.h"
#include "tensor/random.h"

namespace kiln::testing {

template <Backend B>
using AdFn = std::function<Tensor<Autodiff<B>>(const std::vector<Tensor<Autodiff<B>>>&)>;

// Checks d(sum(f(inputs) * w))/d(input) for a fixed random weight w, so every output element
// contributes with its own weight.
template <Backend B>
void GradCheck(const AdFn<B>& f, const std::vector<TensorData>& inputs, double eps = 1e-6, double tolerance = 1e-6) {
  using AD = Tensor<Autodiff<B>>;
  std::vector<AD> leaves;
  for (const TensorData& d : inputs) {
    ASSERT_EQ(d.dtype(), DType::kF64) << "gradient checks run in f64";
    leaves.push_back(AD::from_data(d).require_grad());
  }
  const AD out = f(leaves);
  Generator gen(99);
  const AD weight = AD::uniform(out.shape(), 0.5, 1.5, gen, DType::kF64);
  const auto grads = (out * weight).sum().backward();

  auto loss_at = [&](const std::vector<TensorData>& values) {
    NoGradScope no_grad;
    std::vector<AD> xs;
    for (const TensorData& d : values) xs.push_back(AD::from_data(d));
    return (f(xs) * weight).sum().template item<double>();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto g = grads.get(leaves[i]);
    ASSERT_TRUE(g.has_value()) << "no gradient for input " << i;
    ASSERT_EQ(g->shape(), inputs[i].shape());
    const std::vector<double> analytic = g->to_data().ToDoubles();
    for (int64_t j = 0; j < inputs[i].numel(); ++j) {
      std::vector<TensorData> plus = inputs, minus = inputs;
      plus[i].mutable_values<double>()[j] += eps;
      minus[i].mutable_values<double>()[j] -= eps;
      const double numeric = (loss_at(plus) - loss_at(minus)) / (2 * eps);
      EXPECT_NEAR(analytic[j], numeric, tolerance * (1 + std::abs(numeric))) << "input " << i << " element " << j;
    }
  }
}

// The same gradients computed in a half dtype against the f64 ones (which GradCheck checked
// against finite differences) at the same point: the inputs and the weight rounded to `dtype`
// first, so both runs see identical values. A half op computes in f32 and rounds its result
// once, so each op on the way back adds about one unit roundoff u of `dtype` (2^-8 bf16, 2^-11
// f16); `roundings` is how many such steps the test allows (op count plus a margin for sums).
template <Backend B>
void HalfGradCheck(const AdFn<B>& f, const std::vector<TensorData>& inputs, DType dtype, double roundings = 8) {
  using AD = Tensor<Autodiff<B>>;
  const double u = dtype == DType::kBF16 ? 0x1p-8 : 0x1p-11;
  std::vector<AD> half, wide;
  for (const TensorData& d : inputs) {
    const AD h = AD::from_data(d).to(dtype);
    half.push_back(h.detach().require_grad());
    wide.push_back(h.to(DType::kF64).detach().require_grad());
  }
  const AD out = f(half);
  ASSERT_EQ(out.dtype(), dtype);
  Generator gen(99);
  const AD weight = AD::uniform(out.shape(), 0.5, 1.5, gen, dtype);
  const auto half_grads = (out * weight).sum().backward();
  const auto wide_grads = (f(wide) * weight.to(DType::kF64)).sum().backward();
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto gh = half_grads.get(half[i]);
    const auto gw = wide_grads.get(wide[i]);
    ASSERT_TRUE(gh.has_value() && gw.has_value()) << "no gradient for input " << i;
    ASSERT_EQ(gh->dtype(), dtype);
    const std::vector<double> got = gh->to_data().ToDoubles(), want = gw->to_data().ToDoubles();
    for (size_t j = 0; j < want.size(); ++j) {
      EXPECT_NEAR(got[j], want[j], roundings * u * (1 + std::abs(want[j])))
          << DTypeName(dtype) << " input " << i << " element " << j;
    }
  }
}

inline TensorData Uniform(const Shape& shape, double low, double high, uint64_t seed) {
  Generator gen(seed);
  return RandomUniform(shape, DType::kF64, low, high, gen);
}

}  // namespace kiln::testing

#endif  // KILN_TESTS_AUTODIFF_GRADCHECK_H_
