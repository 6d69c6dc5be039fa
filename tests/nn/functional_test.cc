// nn::functional against references computed loop by loop in f64, gradients against finite
// differences, and bad input named.
#include <gtest/gtest.h>

#include <cmath>

#include "absl/strings/match.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/clip.h"
#include "nn/embedding.h"
#include "nn/functional.h"
#include "nn/linear.h"
#include "nn/norm.h"
#include "tests/autodiff/gradcheck.h"

namespace kiln::nn::functional {
namespace {

using kiln::testing::GradCheck;
using kiln::testing::Uniform;
using AD = Autodiff<Cpu>;
using T = Tensor<AD>;
using Args = std::vector<T>;

std::vector<double> V(const T& t) { return t.to_data().ToDoubles(); }
T F64(const TensorData& d) { return T::from_data(d); }

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol = 1e-12) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
}

template <class F>
std::string ErrorOf(F f) {
  try {
    f();
  } catch (const Error& e) {
    return std::string(e.status().message());
  }
  return "no error";
}

TEST(Functional, LinearOverLeadingDims) {
  const TensorData x = Uniform({2, 3, 4}, -1, 1, 1), w = Uniform({5, 4}, -1, 1, 2), b = Uniform({5}, -1, 1, 3);
  const T bias = F64(b);
  const auto xv = x.ToDoubles(), wv = w.ToDoubles(), bv = b.ToDoubles();
  std::vector<double> want;
  for (int r = 0; r < 6; ++r)
    for (int o = 0; o < 5; ++o) {
      double acc = bv[o];
      for (int i = 0; i < 4; ++i) acc += xv[r * 4 + i] * wv[o * 4 + i];
      want.push_back(acc);
    }
  const T y = linear(F64(x), F64(w), &bias);
  EXPECT_EQ(y.shape(), Shape({2, 3, 5}));
  ExpectNear(V(y), want);
  GradCheck<Cpu>([](const Args& a) { return linear(a[0], a[1], &a[2]); }, {x, w, b});
  EXPECT_EQ(ErrorOf([&] {
              (void)linear(F64(x), F64(Uniform({5, 3}, 0, 1, 4)));
            }),
            "linear: x f64[2,3,4] on cpu:0, weight f64[5,3] on cpu:0 do not fit (x [..., in], weight [out, in], "
            "bias [out])");
}

TEST(Functional, EmbeddingRowsAndScatteredGradient) {
  const TensorData w = Uniform({6, 3}, -1, 1, 5);
  const T ids = T::from_vector<int64_t>({4, 1, 4, 0, 4, 2}, {2, 3});
  const T y = embedding(ids, F64(w));
  EXPECT_EQ(y.shape(), Shape({2, 3, 3}));
  const auto wv = w.ToDoubles();
  std::vector<double> want;
  for (int64_t id : {4, 1, 4, 0, 4, 2})
    for (int j = 0; j < 3; ++j) want.push_back(wv[id * 3 + j]);
  ExpectNear(V(y), want, 0);
  // Repeated ids add up: row 4 was used three times.
  const T leaf = F64(w).require_grad();
  const auto g = embedding(ids, leaf).sum().backward().get(leaf)->to_data().ToDoubles();
  ExpectNear(g, {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 3, 3, 3, 0, 0, 0}, 0);
  EXPECT_TRUE(absl::StrContains(ErrorOf([&] { (void)embedding(T::from_vector<int64_t>({6}, {1}), F64(w)); }), "6"));
  EXPECT_EQ(ErrorOf([&] { (void)embedding(F64(w), F64(w)); }),
            "embedding: needs integer ids and a weight [vocab, dim], got ids f64[6,3] on cpu:0 and weight f64[6,3] "
            "on cpu:0");
}

// Mean and biased variance over the last `k` elements of each row, loop by loop.
std::vector<double> ReferenceNorm(const std::vector<double>& x, int64_t k, const std::vector<double>& w,
                                  const std::vector<double>& b, double eps, bool rms) {
  std::vector<double> out;
  for (size_t r = 0; r < x.size() / k; ++r) {
    double mean = 0, sq = 0;
    for (int64_t i = 0; i < k; ++i) mean += x[r * k + i] / k;
    for (int64_t i = 0; i < k; ++i) {
      const double d = rms ? x[r * k + i] : x[r * k + i] - mean;
      sq += d * d / k;
    }
    for (int64_t i = 0; i < k; ++i) {
      const double d = rms ? x[r * k + i] : x[r * k + i] - mean;
      out.push_back(d / std::sqrt(sq + eps) * w[i] + (b.empty() ? 0 : b[i]));
    }
  }
  return out;
}

TEST(Functional, LayerNormAndRmsNorm) {
  const TensorData x = Uniform({2, 3, 4}, -2, 2, 6), w = Uniform({3, 4}, 0.5, 1.5, 7), b = Uniform({3, 4}, -1, 1, 8);
  const T weight = F64(w), bias = F64(b);
  ExpectNear(V(layer_norm(F64(x), {3, 4}, &weight, &bias)),
             ReferenceNorm(x.ToDoubles(), 12, w.ToDoubles(), b.ToDoubles(), 1e-5, false));
  ExpectNear(V(rms_norm(F64(x), {3, 4}, &weight, 1e-6)),
             ReferenceNorm(x.ToDoubles(), 12, w.ToDoubles(), {}, 1e-6, true));
  GradCheck<Cpu>([](const Args& a) { return layer_norm(a[0], {4}, &a[1], &a[2]); },
                 {x, Uniform({4}, 0.5, 1.5, 9), Uniform({4}, -1, 1, 10)});
  GradCheck<Cpu>([](const Args& a) { return rms_norm(a[0], {4}, &a[1]); }, {x, Uniform({4}, 0.5, 1.5, 11)});
  EXPECT_EQ(ErrorOf([&] { (void)layer_norm(F64(x), {3}, &weight); }),
            "layer_norm: the last dims of x [2,3,4] are not the normalized shape [3]");
  EXPECT_EQ(ErrorOf([&] { (void)layer_norm(F64(x), {4}, &weight); }),
            "layer_norm weight: f64[3,4] on cpu:0 does not match the normalized shape [4]");
}

TEST(Functional, GeluExactAndTanh) {
  const TensorData x = Uniform({7}, -3, 3, 12);
  std::vector<double> exact, tanh_form;
  for (double v : x.ToDoubles()) {
    exact.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    tanh_form.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  ExpectNear(V(gelu(F64(x))), exact);
  ExpectNear(V(gelu(F64(x), GeluApproximation::kTanh)), tanh_form);
  GradCheck<Cpu>([](const Args& a) { return gelu(a[0]); }, {x});
  GradCheck<Cpu>([](const Args& a) { return gelu(a[0], GeluApproximation::kTanh); }, {x});
}

TEST(Functional, DropoutKeepsExpectationAndIsOffOutsideTraining) {
  Generator gen(3);
  const T x = T::ones({10000}, DType::kF64);
  EXPECT_EQ(V(dropout(x, 0.3, false, gen)), V(x));
  const auto y = V(dropout(x, 0.3, true, gen));
  int kept = 0;
  for (double v : y) {
    if (v != 0) {
      ++kept;
      EXPECT_NEAR(v, 1 / 0.7, 1e-12);
    }
  }
  EXPECT_NEAR(kept / 10000.0, 0.7, 0.02);
  EXPECT_EQ(ErrorOf([&] { (void)dropout(x, 1.0, true, gen); }), "dropout: p = 1 must be in [0, 1)");
}

// softmax(q k^T * scale + bias) v, with position i of the queries seeing keys <= i + sk - sq
// when causal; `allowed`, when given, is [sq, sk].
std::vector<double> ReferenceAttention(const TensorData& q, const TensorData& k, const TensorData& v, bool causal,
                                       const std::vector<bool>& allowed = {}) {
  const auto qs = q.shape(), ks = k.shape();
  const int64_t bh = qs[0] * qs[1], sq = qs[2], sk = ks[2], d = qs[3];
  const auto qv = q.ToDoubles(), kv = k.ToDoubles(), vv = v.ToDoubles();
  std::vector<double> out;
  for (int64_t h = 0; h < bh; ++h)
    for (int64_t i = 0; i < sq; ++i) {
      std::vector<double> w(sk, 0.0);
      double top = -INFINITY, total = 0;
      for (int64_t j = 0; j < sk; ++j) {
        if ((causal && j > i + sk - sq) || (!allowed.empty() && !allowed[i * sk + j])) {
          w[j] = -INFINITY;
          continue;
        }
        for (int64_t c = 0; c < d; ++c) w[j] += qv[(h * sq + i) * d + c] * kv[(h * sk + j) * d + c];
        w[j] /= std::sqrt(static_cast<double>(d));
        top = std::max(top, w[j]);
      }
      for (double& x : w) total += (x = std::exp(x - top));
      for (int64_t c = 0; c < d; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < sk; ++j) acc += w[j] / total * vv[(h * sk + j) * d + c];
        out.push_back(acc);
      }
    }
  return out;
}

TEST(Functional, ScaledDotProductAttention) {
  const TensorData q = Uniform({2, 2, 3, 4}, -1, 1, 13), k = Uniform({2, 2, 5, 4}, -1, 1, 14),
                   v = Uniform({2, 2, 5, 4}, -1, 1, 15);
  ExpectNear(V(scaled_dot_product_attention(F64(q), F64(k), F64(v))), ReferenceAttention(q, k, v, false));
  ExpectNear(V(scaled_dot_product_attention(F64(q), F64(k), F64(v), {.causal = true})),
             ReferenceAttention(q, k, v, true));
  // A boolean mask and the additive mask of the same pattern agree.
  std::vector<bool> allowed;
  std::vector<double> additive;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 5; ++j) {
      allowed.push_back((i + j) % 3 != 0);
      additive.push_back(allowed.back() ? 0.0 : -INFINITY);
    }
  const T bool_mask =
      T::from_vector<double>(std::vector<double>(allowed.begin(), allowed.end()), {3, 5}).to(DType::kBool);
  const T add_mask = T::from_vector<double>(additive, {3, 5});
  const auto want = ReferenceAttention(q, k, v, false, allowed);
  ExpectNear(V(scaled_dot_product_attention(F64(q), F64(k), F64(v), {.mask = &bool_mask})), want);
  ExpectNear(V(scaled_dot_product_attention(F64(q), F64(k), F64(v), {.mask = &add_mask})), want);
  GradCheck<Cpu>([](const Args& a) { return scaled_dot_product_attention(a[0], a[1], a[2], {.causal = true}); },
                 {q, k, v});
  const T wrong = T::ones({3, 4}, DType::kBool);
  EXPECT_EQ(ErrorOf([&] { (void)scaled_dot_product_attention(F64(q), F64(k), F64(v), {.mask = &wrong}); }),
            "scaled_dot_product_attention: mask bool[3,4] on cpu:0 does not broadcast to the scores [2,2,3,5]");
}

TEST(Functional, CrossEntropyWithIgnoredRowsAndLabelSmoothing) {
  const TensorData logits = Uniform({4, 3}, -2, 2, 16);
  const T targets = T::from_vector<int64_t>({2, -100, 0, 1}, {4});
  const std::vector<int64_t> ids = {2, -100, 0, 1};
  const auto lv = logits.ToDoubles();
  for (double s : {0.0, 0.1}) {
    double total = 0;
    int counted = 0;
    for (int r = 0; r < 4; ++r) {
      if (ids[r] == -100) continue;
      double top = -INFINITY, z = 0;
      for (int c = 0; c < 3; ++c) top = std::max(top, lv[r * 3 + c]);
      for (int c = 0; c < 3; ++c) z += std::exp(lv[r * 3 + c] - top);
      auto logp = [&](int c) { return lv[r * 3 + c] - top - std::log(z); };
      double uniform = 0;
      for (int c = 0; c < 3; ++c) uniform += logp(c) / 3;
      total += -((1 - s) * logp(ids[r]) + s * uniform);
      ++counted;
    }
    const CrossEntropyOptions mean{.label_smoothing = s}, sum{.reduction = Reduction::kSum, .label_smoothing = s};
    ExpectNear(V(cross_entropy(F64(logits), targets, mean)), {total / counted});
    ExpectNear(V(cross_entropy(F64(logits), targets, sum)), {total});
    GradCheck<Cpu>([&](const Args& a) { return cross_entropy(a[0], targets, mean); }, {logits});
  }
  EXPECT_EQ(ErrorOf([&] { (void)cross_entropy(F64(logits), F64(Uniform({4}, 0, 1, 1))); }),
            "cross_entropy: needs logits [N, C] and integer targets [N], got f64[4,3] on cpu:0 and f64[4] on cpu:0");
}

TEST(Functional, ClipGradNormScalesToTheGlobalNorm) {
  Generator gen(8);
  Linear<AD> layer(3, 2, gen, {.dtype = DType::kF64});
  const T x = F64(Uniform({4, 3}, -1, 1, 17));
  auto grads = (layer(x) * 10).sum().backward();
  double sq = 0;
  std::vector<std::vector<double>> before;
  for (auto& [name, p] : layer.named_parameters()) {
    before.push_back(grads.get(*p)->to_data().ToDoubles());
    for (double v : before.back()) sq += v * v;
  }
  EXPECT_NEAR(ClipGradNorm(layer, grads, 0.5), std::sqrt(sq), 1e-9);
  double after = 0;
  size_t i = 0;
  for (auto& [name, p] : layer.named_parameters()) {
    const auto g = grads.get(*p)->to_data().ToDoubles();
    for (size_t j = 0; j < g.size(); ++j) {
      EXPECT_NEAR(g[j], before[i][j] * 0.5 / (std::sqrt(sq) + 1e-6), 1e-12);
      after += g[j] * g[j];
    }
    ++i;
  }
  EXPECT_NEAR(std::sqrt(after), 0.5, 1e-6);
  // Below the bound nothing changes.
  auto small = (layer(x) * 1e-3).sum().backward();
  const auto untouched = small.get(layer.weight())->to_data().ToDoubles();
  ClipGradNorm(layer, small, 100.0);
  EXPECT_EQ(small.get(layer.weight())->to_data().ToDoubles(), untouched);
  EXPECT_EQ(ErrorOf([&] { ClipGradNorm(layer, small, std::nan("")); }),
            "ClipGradNorm: max_norm nan must be a positive number");
}

// The modules call the functions with their own parameters, under PyTorch's names.
TEST(Functional, ModulesAreTheFunctionsWithParameters) {
  Generator gen(4);
  Embedding<AD> table(10, 4, gen, {.init_std = 0.02, .dtype = DType::kF64});
  LayerNorm<AD> ln({4}, {.dtype = DType::kF64});
  RMSNorm<AD> rms({4}, {.eps = 1e-6, .dtype = DType::kF64});
  const T ids = T::from_vector<int64_t>({3, 3, 7}, {3});
  const T x = table(ids);
  ExpectNear(V(x), V(embedding(ids, table.weight())), 0);
  ExpectNear(V(ln(x)), V(layer_norm(x, {4})));
  ExpectNear(V(rms(x)), V(rms_norm(x, {4})));
  std::vector<std::string> names;
  for (auto& [name, p] : ln.named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"weight", "bias"}));
  double sq = 0;
  for (double v : V(table.weight())) sq += v * v;
  EXPECT_NEAR(std::sqrt(sq / 40), 0.02, 0.006);  // the asked-for spread
}

}  // namespace
}  // namespace kiln::nn::functional
