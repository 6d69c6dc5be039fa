// Conformance: the fused operations (tensor/fused.h) on every backend, against references
// computed loop by loop in f64 and against their composition of plain ops; on a backend without
// a fused kernel the two are the same code, and the reference still holds.
#include <cmath>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"

#include "tensor/fused.h"
#include "tests/tensor/conformance.h"

namespace kiln::testing {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Row r of `x` (the last dim) as its first element's flat offset and the row's width.
int64_t Width(const Ref& x) { return x.shape.back(); }
int64_t RowCount(const Ref& x) { return Width(x) == 0 ? 0 : static_cast<int64_t>(x.v.size()) / Width(x); }

Ref RefSoftmax(const Ref& x, bool log, bool causal) {
  Ref y{x.shape, x.v};
  const int64_t n = Width(x), sq = causal ? x.shape[x.shape.size() - 2] : 1;
  for (int64_t r = 0; r < RowCount(x); ++r) {
    const int64_t keep = causal ? std::clamp<int64_t>(r % sq + n - sq + 1, 0, n) : n;
    double* row = y.v.data() + r * n;
    double m = -kInf, sum = 0;
    for (int64_t j = 0; j < keep; ++j) m = std::max(m, row[j]);
    for (int64_t j = 0; j < keep; ++j) sum += std::exp(row[j] - m);
    for (int64_t j = 0; j < n; ++j) {
      if (keep == 0) {
        row[j] = NAN;
      } else if (j >= keep) {
        row[j] = log ? -kInf : 0;
      } else {
        row[j] = log ? row[j] - m - std::log(sum) : std::exp(row[j] - m) / sum;
      }
    }
  }
  return y;
}

struct RefNormOut {
  Ref y, mean, rstd;
};
RefNormOut RefNorm(const Ref& x, const std::vector<double>* w, const std::vector<double>* b, double eps, bool rms) {
  const int64_t n = Width(x), rows = RowCount(x);
  const Index outer(x.shape.begin(), x.shape.end() - 1);
  RefNormOut out{{x.shape, x.v}, {outer, std::vector<double>(rows)}, {outer, std::vector<double>(rows)}};
  for (int64_t r = 0; r < rows; ++r) {
    const double* in = x.v.data() + r * n;
    double mean = 0, var = 0;
    if (!rms) {
      for (int64_t j = 0; j < n; ++j) mean += in[j] / n;
    }
    for (int64_t j = 0; j < n; ++j) var += (in[j] - mean) * (in[j] - mean) / n;
    const double rstd = 1 / std::sqrt(var + eps);
    out.mean.v[r] = rms ? rstd : mean;
    out.rstd.v[r] = rstd;
    for (int64_t j = 0; j < n; ++j) {
      out.y.v[r * n + j] = (in[j] - mean) * rstd * (w ? (*w)[j] : 1) + (b ? (*b)[j] : 0);
    }
  }
  return out;
}

double RefGelu(double x, bool tanh) {
  if (tanh) return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

// Per-row loss and log-sum-exp.
std::pair<Ref, Ref> RefCrossEntropy(const Ref& logits, const std::vector<int64_t>& y, int64_t ignore, double s) {
  const int64_t n = Width(logits), rows = RowCount(logits);
  Ref loss{{rows}, std::vector<double>(rows)}, lse = loss;
  for (int64_t r = 0; r < rows; ++r) {
    const double* x = logits.v.data() + r * n;
    double m = -kInf, sum = 0, total = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, x[j]);
    for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - m), total += x[j];
    lse.v[r] = m + std::log(sum);
    loss.v[r] = y[r] == ignore ? 0 : lse.v[r] - (1 - s) * x[y[r]] - s / n * total;
  }
  return {loss, lse};
}

struct RefAttentionOut {
  Ref y, weights;
};
// GPT's causal attention over packed q, k, v [b, s, 3 d], head by head, loop by loop.
RefAttentionOut RefCausalAttention(const Ref& qkv, int64_t heads) {
  const int64_t b = qkv.shape[0], s = qkv.shape[1], d = qkv.shape[2] / 3, hd = d / heads;
  RefAttentionOut out{Make({b, s, d}), Make({b, heads, s, s})};
  const auto at = [&](int64_t seq, int64_t t, int64_t part, int64_t h, int64_t c) {
    return qkv.v[(seq * s + t) * 3 * d + part * d + h * hd + c];
  };
  for (int64_t seq = 0; seq < b; ++seq) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < s; ++i) {
        double* w = out.weights.v.data() + ((seq * heads + h) * s + i) * s;
        double m = -kInf, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          for (int64_t c = 0; c < hd; ++c) w[j] += at(seq, i, 0, h, c) * at(seq, j, 1, h, c) / std::sqrt(hd);
          m = std::max(m, w[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(w[j] - m);
        for (int64_t j = 0; j <= i; ++j) w[j] = std::exp(w[j] - m) / sum;
        for (int64_t c = 0; c < hd; ++c) {
          double& y = out.y.v[(seq * s + i) * d + h * hd + c];
          for (int64_t j = 0; j <= i; ++j) y += w[j] * at(seq, j, 2, h, c);
        }
      }
    }
  }
  return out;
}

template <class C>
class Fused : public Conformance<C> {};
TYPED_TEST_SUITE(Fused, FloatConfigs, ConfigNames);

TYPED_TEST(Fused, SoftmaxAndLogSoftmaxWithACausalMask) {
  using Tn = typename TestFixture::Tn;
  struct Case {
    Shape shape;
    bool causal;
  };
  // sq < sk (the query ends the keys), sq > sk (rows with nothing to see are NaN), a long row,
  // and an empty one.
  const Case cases[] = {{{3, 5, 7}, false}, {{2, 3, 6, 9}, true}, {{2, 9, 6}, true},
                        {{2, 5000}, false}, {{0, 7}, false},      {{4, 0}, false}};
  for (const Case& c : cases) {
    for (bool log : {false, true}) {
      SCOPED_TRACE(c.shape.ToString() + (log ? " log" : "") + (c.causal ? " causal" : ""));
      const Tn x = this->Random(c.shape, -4, 4);
      const Ref want = RefSoftmax(this->R(x), log, c.causal);
      this->ExpectClose(fused::softmax_last(x, log, c.causal), want, 4);
      this->ExpectClose(fused::composed::Softmax(x, log, c.causal), want, 4);
      this->ExpectClose(fused::softmax_last(this->Strided(x), log, c.causal), want, 4);
    }
  }
  // Tensor::softmax over the last dim takes the same path.
  const Tn x = this->Random({4, 6});
  this->ExpectClose(x.softmax(-1), RefSoftmax(this->R(x), false, false), 4);
  this->ExpectClose(x.transpose(0, 1).log_softmax(1), RefSoftmax(this->R(x.transpose(0, 1)), true, false), 4);
}

TYPED_TEST(Fused, LayerNormAndRmsNormWithTheirStatistics) {
  using Tn = typename TestFixture::Tn;
  for (const Shape& shape : {Shape{4, 6, 33}, Shape{3, 1}, Shape{0, 5}, Shape{300}}) {
    const int64_t n = shape[shape.rank() - 1];
    const Tn x = this->Random(shape, -3, 5, 1);
    const Tn w = this->Random({n}, 0.5, 1.5, 2), b = this->Random({n}, -1, 1, 3);
    const std::vector<double> wv = this->R(w).v, bv = this->R(b).v;
    for (bool rms : {false, true}) {
      for (bool affine : {false, true}) {
        SCOPED_TRACE(shape.ToString() + (rms ? " rms" : " layer") + (affine ? " affine" : ""));
        const Tn* wp = affine ? &w : nullptr;
        const Tn* bp = affine && !rms ? &b : nullptr;
        const RefNormOut want = RefNorm(this->R(x), affine ? &wv : nullptr, bp ? &bv : nullptr, 1e-5, rms);
        for (const auto& got : {fused::norm_last(x, wp, bp, 1e-5, rms), fused::composed::Norm(x, wp, bp, 1e-5, rms),
                                fused::norm_last(this->Strided(x), wp, bp, 1e-5, rms)}) {
          this->ExpectClose(got.y, want.y, 8);
          this->ExpectClose(got.mean, want.mean, 8);
          this->ExpectClose(got.rstd, want.rstd, 8);
        }
      }
    }
  }
}

TYPED_TEST(Fused, GeluExactAndTanh) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({10, 100}, -6, 6);
  for (bool tanh : {false, true}) {
    SCOPED_TRACE(tanh ? "tanh" : "erf");
    const Ref want = Map(this->R(x), [tanh](double v) { return RefGelu(v, tanh); });
    this->ExpectClose(fused::gelu(x, tanh), want, 8);
    this->ExpectClose(fused::composed::Gelu(x, tanh), want, 8);
    this->ExpectClose(fused::gelu(x.transpose(0, 1), tanh), Permute(want, {1, 0}), 8);
  }
}

// Shapes around the CPU kernel's blocks of 64 queries, one head or several, empty batches.
TYPED_TEST(Fused, CausalAttentionOverPackedHeads) {
  using Tn = typename TestFixture::Tn;
  struct Case {
    int64_t b, s, heads, hd;
  };
  for (const Case& c : {Case{2, 5, 2, 3}, Case{1, 70, 1, 4}, Case{2, 130, 3, 2}, Case{1, 1, 1, 1}, Case{0, 3, 1, 2},
                        Case{2, 0, 2, 2}}) {
    SCOPED_TRACE(absl::StrCat("b ", c.b, " s ", c.s, " heads ", c.heads, " hd ", c.hd));
    const Tn qkv = this->Random({c.b, c.s, 3 * c.heads * c.hd}, -1, 1);
    const RefAttentionOut want = RefCausalAttention(this->R(qkv), c.heads);
    for (const auto& got :
         {fused::causal_attention(qkv, c.heads), fused::causal_attention(this->Strided(qkv), c.heads)}) {
      this->ExpectClose(got.y, want.y, 16);
      this->ExpectClose(got.weights, want.weights, 16);
    }
    if constexpr (!kIsHalf<typename TestFixture::T>) {  // the composition rounds at each of its ops
      const auto composed = fused::composed::CausalAttention(qkv, c.heads);
      this->ExpectClose(composed.y, want.y, 16);
      this->ExpectClose(composed.weights, want.weights, 16);
    }
  }
}

// Rows enough to split over threads, rank 3 and 1, no bias, an empty input dim.
TYPED_TEST(Fused, LinearAddsItsBiasToTheProduct) {
  using Tn = typename TestFixture::Tn;
  struct Case {
    Shape x;
    int64_t out;
    bool bias;
  };
  for (const Case& c : {Case{{3, 70, 33}, 17, true}, Case{{300, 40}, 50, false}, Case{{5}, 3, true},
                        Case{{4, 0}, 3, true}, Case{{0, 6}, 2, true}}) {
    SCOPED_TRACE(absl::StrCat(c.x.ToString(), " -> ", c.out, c.bias ? " with bias" : ""));
    const int64_t in = c.x[c.x.rank() - 1];
    const Tn x = this->Random(c.x, -1, 1, 1), w = this->Random({c.out, in}, -1, 1, 2),
             b = this->Random({c.out}, -1, 1, 3);
    const Ref rx = this->R(x), rw = this->R(w), rb = this->R(b);
    Index shape = rx.shape;
    shape.back() = c.out;
    Ref want = Make(shape);
    for (size_t r = 0; r < want.v.size() / c.out; ++r) {
      for (int64_t o = 0; o < c.out; ++o) {
        double sum = c.bias ? rb.v[o] : 0;
        for (int64_t i = 0; i < in; ++i) sum += rx.v[r * in + i] * rw.v[o * in + i];
        want.v[r * c.out + o] = sum;
      }
    }
    const Tn* bias = c.bias ? &b : nullptr;
    this->ExpectClose(fused::linear(x, w, bias), want, 4);
    this->ExpectClose(fused::linear(this->Strided(x), this->Strided(w), bias), want, 4);
    this->ExpectClose(fused::composed::Linear(x, w, bias), want, 4);
  }
}

TYPED_TEST(Fused, CrossEntropyRowsWithIgnoredRowsAndSmoothing) {
  using Tn = typename TestFixture::Tn;
  const Tn logits = this->Random({6, 11}, -3, 3);
  const std::vector<int64_t> ids = {3, -100, 0, 10, 7, -100};
  const Tn targets = Tn::from_vector(ids, {6});
  for (double s : {0.0, 0.1}) {
    SCOPED_TRACE(s);
    const auto [loss, lse] = RefCrossEntropy(this->R(logits), ids, -100, s);
    for (const auto& got : {fused::cross_entropy_rows(logits, targets, -100, s),
                            fused::composed::CrossEntropyRows(logits, targets, -100, s),
                            fused::cross_entropy_rows(this->Strided(logits), targets.to(DType::kI32), -100, s)}) {
      this->ExpectClose(got.loss, loss, 8);
      this->ExpectClose(got.lse, lse, 8);
    }
  }
  const Tn bad = Tn::from_vector(std::vector<int64_t>{3, 11, 0, 0, 0, 0}, {6});
  try {
    (void)fused::cross_entropy_rows(logits, bad, -100, 0).loss.to_data();
    ADD_FAILURE() << "no error for target 11";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().code(), absl::StatusCode::kOutOfRange);
    if constexpr (FusedCrossEntropy<typename TestFixture::B>) {
      EXPECT_EQ(e.status().message(), "cross_entropy: target 11 of row 1 is outside [0, 11)");
    }
  }
}

// Each backward kernel against the composed backward formula, for arbitrary output gradients
// (also at masked positions) and strided operands.
TYPED_TEST(Fused, BackwardKernelsEqualTheComposedFormulas) {
  using B = typename TestFixture::B;
  using Tn = typename TestFixture::Tn;
  const auto close = [&](const Tn& got, const Tn& want) { this->ExpectClose(got, this->R(want), 16); };
  const Tn gy = this->Random({2, 5, 7}, -1, 1, 5);
  if constexpr (FusedSoftmax<B>) {
    for (bool log : {false, true}) {
      for (bool causal : {false, true}) {
        SCOPED_TRACE(std::string(log ? "log " : "") + (causal ? "causal" : ""));
        const Tn y = fused::softmax_last(this->Random({2, 5, 7}), log, causal);
        close(Tn(B::softmax_last_backward(y.primitive(), this->Strided(gy).primitive(), log, causal)),
              fused::composed::SoftmaxBackward(y, gy, log, causal));
      }
    }
  }
  const Tn x = this->Random({2, 5, 7}, -2, 3, 6), w = this->Random({7}, 0.5, 1.5, 7);
  if constexpr (FusedNorm<B>) {
    for (bool rms : {false, true}) {
      SCOPED_TRACE(rms ? "rms" : "layer");
      const auto f = fused::norm_last(x, &w, nullptr, 1e-5, rms);
      const auto got = B::norm_last_backward(this->Strided(gy).primitive(), x.primitive(), &w.primitive(),
                                             f.mean.primitive(), f.rstd.primitive(), rms, true);
      const auto want = fused::composed::NormGrad(gy, x, &w, f.mean, f.rstd, rms, true);
      close(Tn(got.x_grad), want.x_grad);
      close(Tn(got.weight_grad), want.weight_grad);
      close(Tn(got.bias_grad), want.bias_grad);
    }
  }
  if constexpr (FusedGelu<B>) {
    for (bool tanh : {false, true}) {
      close(Tn(B::gelu_backward(x.primitive(), this->Strided(gy).primitive(), tanh)),
            fused::composed::GeluBackward(x, gy, tanh));
    }
  }
  if constexpr (FusedAttention<B>) {
    for (const int64_t s : {5, 130}) {  // one block of queries, and three
      SCOPED_TRACE(absl::StrCat("attention s ", s));
      const Tn qkv = this->Random({2, s, 12}, -1, 1, 10), g = this->Random({2, s, 4}, -1, 1, 11);
      const Tn weights = fused::causal_attention(qkv, 2).weights;
      close(Tn(B::causal_attention_backward(qkv.primitive(), weights.primitive(), this->Strided(g).primitive(), 2)),
            fused::composed::CausalAttentionBackward(qkv, weights, g, 2));
    }
  }
  if constexpr (FusedCrossEntropy<B>) {
    const Tn logits = this->Random({4, 7}, -2, 2, 8), g = this->Random({4}, -1, 1, 9);
    const Tn ids = Tn::from_vector(std::vector<int64_t>{6, -100, 0, 3}, {4});
    for (double s : {0.0, 0.1}) {
      const Tn lse = fused::cross_entropy_rows(logits, ids, -100, s).lse;
      close(Tn(B::cross_entropy_rows_backward(logits.primitive(), ids.primitive(), lse.primitive(), g.primitive(), -100,
                                              s)),
            fused::composed::CrossEntropyRowsBackward(logits, ids, lse, g, -100, s));
    }
  }
}

// The optimizer updates against their composition (nn/optim's rules, which tests/nn checks
// against hand-computed values), first and later steps, with and without decay.
TYPED_TEST(Fused, OptimizerUpdatesEqualTheirComposition) {
  using Tn = typename TestFixture::Tn;
  const Tn p = this->Random({3, 50}, -1, 1, 11), g = this->Random({3, 50}, -1, 1, 12);
  const Tn m = this->Random({3, 50}, -1, 1, 13), v = this->Random({3, 50}, 0, 1, 14);
  const auto same = [&](const Tn& got, const Tn& want) { this->ExpectClose(got, this->R(want), 4); };
  for (const bool first : {true, false}) {
    for (const double wd : {0.0, 0.1}) {
      for (const auto& [momentum, nesterov] : {std::pair{0.0, false}, {0.9, false}, {0.9, true}}) {
        SCOPED_TRACE(absl::StrCat("sgd first ", first, " wd ", wd, " momentum ", momentum, " nesterov ", nesterov));
        const auto got = fused::sgd_update(p, this->Strided(g), first ? nullptr : &m, 0.05, momentum, wd, nesterov);
        const auto want = fused::composed::SgdUpdate(p, g, first ? nullptr : &m, 0.05, momentum, wd, nesterov);
        same(got.param, want.param);
        if (momentum != 0) same(got.velocity, want.velocity);
      }
      SCOPED_TRACE(absl::StrCat("adamw first ", first, " wd ", wd));
      const double c1 = 1 - std::pow(0.9, 3), c2 = 1 - std::pow(0.999, 3);
      const auto got =
          fused::adamw_update(p, g, first ? nullptr : &m, first ? nullptr : &v, 1e-2, 0.9, 0.999, 1e-8, wd, c1, c2);
      const auto want = fused::composed::AdamWUpdate(p, g, first ? nullptr : &m, first ? nullptr : &v, 1e-2, 0.9, 0.999,
                                                     1e-8, wd, c1, c2);
      same(got.param, want.param);
      same(got.exp_avg, want.exp_avg);
      same(got.exp_avg_sq, want.exp_avg_sq);
    }
  }
  try {
    (void)fused::adamw_update(p, g, &m, nullptr, 1e-2, 0.9, 0.999, 1e-8, 0, 1, 1);
    ADD_FAILURE() << "no error for one moment";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(),
              absl::StrCat("adamw_update: needs both moments or neither, for parameter ", p.Describe()));
  }
}

TYPED_TEST(Fused, BadArgumentsAreNamed) {
  using Tn = typename TestFixture::Tn;
  const Tn x = this->Random({2, 3});
  const Tn w = this->Random({4});
  const Tn ids = Tn::from_vector(std::vector<int64_t>{0, 1}, {2});
  const auto message = [](auto f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.status().message());
    }
    return std::string("no error");
  };
  const std::string d = DTypeName(this->kDType);
  const std::string dev = x.device().ToString();
  EXPECT_EQ(message([&] { (void)fused::softmax_last(x.sum(), false, false); }),
            "softmax: needs a floating tensor of rank >= 1, got " + d + "[] on " + dev);
  EXPECT_EQ(message([&] { (void)fused::softmax_last(x.sum({0}), true, true); }),
            "log_softmax: needs a floating tensor of rank >= 2, got " + d + "[3] on " + dev);
  EXPECT_EQ(message([&] { (void)fused::norm_last(x, &w, nullptr, 1e-5, false); }),
            "layer_norm: weight and bias must be " + d + "[3] on " + dev + " like the last dim of x, got " + d +
                "[4] on " + dev);
  EXPECT_EQ(message([&] { (void)fused::norm_last(x, nullptr, nullptr, -1, true); }), "rms_norm: eps -1 must be >= 0");
  EXPECT_EQ(message([&] { (void)fused::gelu(ids, false); }), "gelu: needs a floating tensor, got i64[2] on " + dev);
  EXPECT_EQ(message([&] { (void)fused::cross_entropy_rows(x, x, -100, 0); }),
            "cross_entropy: needs logits [N, C >= 1] and integer targets [N] on one device, got " + d + "[2,3] on " +
                dev + " and " + d + "[2,3] on " + dev);
  EXPECT_EQ(message([&] {
              (void)fused::causal_attention(this->Random({2, 3, 12}), 5);
            }),
            "causal_attention: needs a floating qkv [batch, seq, 3 x heads x head_dim], got " + d + "[2,3,12] on " +
                dev + " for 5 heads");
  EXPECT_EQ(message([&] { (void)fused::causal_attention(x, 1); }),
            "causal_attention: needs a floating qkv [batch, seq, 3 x heads x head_dim], got " + d + "[2,3] on " + dev +
                " for 1 heads");
  EXPECT_EQ(message([&] {
              (void)fused::linear(x, w.reshape({2, 2}), &w);
            }),
            "linear: needs x [..., in], weight [out, in] and bias [out] of one float dtype on one device, got " + d +
                "[2,3] on " + dev + ", " + d + "[2,2] on " + dev + " and " + d + "[4] on " + dev);
  EXPECT_EQ(message([&] { (void)fused::cross_entropy_rows(x, ids, -100, 1.5); }),
            "cross_entropy: label_smoothing 1.5 must be in [0, 1]");
}

}  // namespace
}  // namespace kiln::testing
