// Vulkan's fused kernels (tensor/fused_ops.h) against a plain f64 host reference written here
// (itself checked against the CPU backend's composition of plain ops), in f32 and f64: causal
// masks with sq < sk and sq > sk (fully masked rows), strided inputs, long and empty rows,
// optional norm parameters, ignored targets, label smoothing and the bad-target error.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "backends/vulkan/vulkan_backend.h"
#include "tensor/fused_ops.h"
#include "tests/backends.h"

namespace kiln {
namespace {

using P = Vulkan::Primitive;
using Dims64 = std::vector<int64_t>;
constexpr double kInf = std::numeric_limits<double>::infinity();

// A dense row-major f64 array: inputs (rounded to the tested type) and reference results.
struct Host {
  Dims64 shape;
  std::vector<double> v;
  int64_t len() const { return shape.empty() ? 1 : shape.back(); }
  int64_t rows() const { return len() == 0 ? 0 : static_cast<int64_t>(v.size()) / len(); }
};

Host Zeros(Dims64 shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return Host{std::move(shape), std::vector<double>(n, 0.0)};
}

// ---- The reference: straightforward loops in f64. ----

int64_t Kept(const Dims64& shape, int64_t row, bool causal) {
  const int64_t sk = shape.back();
  if (!causal) return sk;
  const int64_t sq = shape[shape.size() - 2];
  return std::clamp<int64_t>(row % sq + 1 + (sk - sq), 0, sk);
}

Host RefSoftmax(const Host& x, bool log, bool causal) {
  Host y = Zeros(x.shape);
  const int64_t n = x.len();
  for (int64_t r = 0; r < x.rows(); ++r) {
    const double* in = &x.v[r * n];
    double* out = &y.v[r * n];
    const int64_t kept = Kept(x.shape, r, causal);
    double m = -kInf, s = 0;
    for (int64_t j = 0; j < kept; ++j) m = std::max(m, in[j]);
    for (int64_t j = 0; j < kept; ++j) s += std::exp(in[j] - m);
    for (int64_t j = 0; j < n; ++j) {
      if (kept == 0) {
        out[j] = NAN;
      } else if (j >= kept) {
        out[j] = log ? -kInf : 0;
      } else {
        out[j] = log ? in[j] - m - std::log(s) : std::exp(in[j] - m) / s;
      }
    }
  }
  return y;
}

Host RefSoftmaxBackward(const Host& y, const Host& gy, bool log, bool causal) {
  Host gx = Zeros(y.shape);
  const int64_t n = y.len();
  for (int64_t r = 0; r < y.rows(); ++r) {
    const int64_t kept = Kept(y.shape, r, causal);
    double s = 0;
    for (int64_t j = 0; j < kept; ++j) s += log ? gy.v[r * n + j] : gy.v[r * n + j] * y.v[r * n + j];
    for (int64_t j = 0; j < kept; ++j) {
      const double yy = y.v[r * n + j], g = gy.v[r * n + j];
      gx.v[r * n + j] = log ? g - std::exp(yy) * s : yy * (g - s);
    }
  }
  return gx;
}

struct RefNorm {
  Host y, mean, rstd;
};

Dims64 RowsShape(const Dims64& s) { return Dims64(s.begin(), s.end() - 1); }

RefNorm RefNormForward(const Host& x, const Host* w, const Host* b, double eps, bool rms) {
  RefNorm out{Zeros(x.shape), Zeros(RowsShape(x.shape)), Zeros(RowsShape(x.shape))};
  const int64_t n = x.len();
  for (int64_t r = 0; r < static_cast<int64_t>(out.mean.v.size()); ++r) {
    const double* in = &x.v[r * n];
    double mu = 0, ss = 0;
    if (!rms) {
      for (int64_t j = 0; j < n; ++j) mu += in[j];
      mu /= n;
    }
    for (int64_t j = 0; j < n; ++j) ss += (in[j] - mu) * (in[j] - mu);
    const double rstd = 1 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) {
      out.y.v[r * n + j] = (in[j] - mu) * rstd * (w ? w->v[j] : 1) + (b ? b->v[j] : 0);
    }
    out.mean.v[r] = rms ? rstd : mu;
    out.rstd.v[r] = rstd;
  }
  return out;
}

struct RefNormGrads {
  Host x, weight, bias;
};

RefNormGrads RefNormBackward(const Host& gy, const Host& x, const Host* w, const Host& mean, const Host& rstd,
                             bool rms) {
  const int64_t n = x.len();
  RefNormGrads out{Zeros(x.shape), Zeros({n}), Zeros({n})};
  for (int64_t r = 0; r < static_cast<int64_t>(mean.v.size()); ++r) {
    const double mu = rms ? 0 : mean.v[r], rs = rstd.v[r];
    std::vector<double> g(n), xhat(n);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < n; ++j) {
      xhat[j] = (x.v[r * n + j] - mu) * rs;
      g[j] = gy.v[r * n + j] * (w ? w->v[j] : 1);
      mg += g[j] / n;
      mgx += g[j] * xhat[j] / n;
      out.weight.v[j] += gy.v[r * n + j] * xhat[j];
      out.bias.v[j] += gy.v[r * n + j];
    }
    for (int64_t j = 0; j < n; ++j) out.x.v[r * n + j] = rs * (g[j] - (rms ? 0 : mg) - xhat[j] * mgx);
  }
  return out;
}

constexpr double kK = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kC = 0.044715;

double RefGelu(double x, bool tanh) {
  if (tanh) return 0.5 * x * (1 + std::tanh(kK * (x + kC * x * x * x)));
  return 0.5 * x * std::erfc(-x / std::sqrt(2.0));
}

double RefGeluGrad(double x, bool tanh) {
  if (tanh) {
    const double t = std::tanh(kK * (x + kC * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * kK * (1 + 3 * kC * x * x);
  }
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * M_PI);
}

struct RefCe {
  Host loss, lse;
};

RefCe RefCrossEntropy(const Host& x, const std::vector<int64_t>& t, int64_t ignore, double s) {
  const int64_t rows = x.shape[0], c = x.shape[1];
  RefCe out{Zeros({rows}), Zeros({rows})};
  for (int64_t r = 0; r < rows; ++r) {
    double m = -kInf, se = 0, sx = 0;
    for (int64_t j = 0; j < c; ++j) m = std::max(m, x.v[r * c + j]);
    for (int64_t j = 0; j < c; ++j) {
      se += std::exp(x.v[r * c + j] - m);
      sx += x.v[r * c + j];
    }
    out.lse.v[r] = m + std::log(se);
    if (t[r] != ignore) out.loss.v[r] = out.lse.v[r] - (1 - s) * x.v[r * c + t[r]] - s / c * sx;
  }
  return out;
}

Host RefCrossEntropyBackward(const Host& x, const std::vector<int64_t>& t, const Host& lse, const Host& g,
                             int64_t ignore, double s) {
  const int64_t rows = x.shape[0], c = x.shape[1];
  Host gx = Zeros(x.shape);
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == ignore) continue;
    for (int64_t j = 0; j < c; ++j) {
      gx.v[r * c + j] = g.v[r] * (std::exp(x.v[r * c + j] - lse.v[r]) - (j == t[r] ? 1 - s : 0) - s / c);
    }
  }
  return gx;
}

// ---- The fixture: T is the tested float type. ----

template <class T>
class FusedTest : public ::testing::Test {
 protected:
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(Vulkan); }
  static constexpr double kTol = sizeof(T) == 4 ? 1e-5 : 1e-12;

  // Uniform values in [low, high), rounded to T so that the reference sees the same inputs.
  static Host Random(Dims64 shape, double low = -3, double high = 3, uint64_t seed = 1) {
    Host h = Zeros(std::move(shape));
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<double> u(low, high);
    for (double& v : h.v) v = static_cast<T>(u(gen));
    return h;
  }
  // A reference result as the kernel's input (e.g. y for the softmax backward), rounded to T.
  static Host Rounded(Host h) {
    for (double& v : h.v) v = static_cast<T>(v);
    return h;
  }
  static TensorData Data(const Host& h) {
    std::vector<T> values(h.v.begin(), h.v.end());
    return TensorData::FromVector(values, Shape(h.shape));
  }
  static P Up(const Host& h) { return Vulkan::from_data(Data(h), VulkanDevice(0)); }
  // The same values as a non-contiguous view: stored transposed, then permuted back.
  static P UpTransposed(const Host& h) {
    const int64_t a = h.shape[0], b = h.shape[1];
    Host t = Zeros({b, a});
    for (int64_t i = 0; i < a; ++i) {
      for (int64_t j = 0; j < b; ++j) t.v[j * a + i] = h.v[i * b + j];
    }
    const int64_t dims[] = {1, 0};
    P view = Vulkan::permute(Up(t), dims);
    EXPECT_FALSE(view.IsContiguous());
    return view;
  }
  static P Targets(const std::vector<int64_t>& t) {
    return Vulkan::from_data(TensorData::FromVector(t, Shape({static_cast<int64_t>(t.size())})), VulkanDevice(0));
  }

  // |got - want| <= tol (|want| + 0.1 max|want|): relative where values are large, and an
  // absolute floor scaled to the tensor for results that cancel. NaN and inf must match.
  static void ExpectClose(const P& got, const Host& want, double scale = 1) {
    const TensorData data = Vulkan::to_data(got);
    ASSERT_EQ(data.dtype(), DTypeOf<T>());
    ASSERT_EQ(data.shape(), Shape(want.shape));
    ASSERT_TRUE(got.IsContiguous());
    double max_abs = 0;
    for (double w : want.v) {
      if (std::isfinite(w)) max_abs = std::max(max_abs, std::abs(w));
    }
    const double tol = kTol * scale;
    int bad = 0;
    for (int64_t i = 0; i < data.numel() && bad < 10; ++i) {
      const double w = want.v[i], g = data.AsDouble(i);
      if (std::isnan(w) || std::isinf(w)) {
        if (std::isnan(w) ? !std::isnan(g) : g != w) ++bad;
        EXPECT_TRUE(std::isnan(w) ? std::isnan(g) : g == w) << "element " << i << ": " << g << " vs " << w;
        continue;
      }
      const bool ok = std::abs(g - w) <= tol * (std::abs(w) + 0.1 * max_abs);
      if (!ok) ++bad;
      EXPECT_TRUE(ok) << "element " << i << ": " << g << " vs " << w << " (diff " << g - w << ")";
    }
  }

  void CheckSoftmax(const Host& x, const P& xv, bool causal) {
    for (bool log : {false, true}) {
      SCOPED_TRACE(log ? "log_softmax" : "softmax");
      const Host y = RefSoftmax(x, log, causal);
      ExpectClose(Vulkan::softmax_last(xv, log, causal), y);
      const Host yr = Rounded(y), gy = Random(x.shape, -1, 1, 5);
      ExpectClose(Vulkan::softmax_last_backward(Up(yr), Up(gy), log, causal), RefSoftmaxBackward(yr, gy, log, causal));
    }
  }

  void CheckNorm(const Host& x, const P& xv) {
    const int64_t n = x.len();
    const Host w = Random({n}, 0.5, 1.5, 11), b = Random({n}, -1, 1, 12);
    const P wv = Up(w), bv = Up(b);
    for (bool rms : {false, true}) {
      for (bool with_w : {false, true}) {
        for (bool with_b : {false, true}) {
          SCOPED_TRACE(::testing::Message()
                       << (rms ? "rms" : "layer") << (with_w ? " weight" : "") << (with_b ? " bias" : ""));
          const RefNorm ref = RefNormForward(x, with_w ? &w : nullptr, with_b ? &b : nullptr, 1e-5, rms);
          const NormForward<P> got = Vulkan::norm_last(xv, with_w ? &wv : nullptr, with_b ? &bv : nullptr, 1e-5, rms);
          ExpectClose(got.y, ref.y);
          ExpectClose(got.mean, ref.mean);
          ExpectClose(got.rstd, ref.rstd);
          // The backward from the reference's (rounded) statistics.
          const Host gy = Random(x.shape, -1, 1, 13), mean = Rounded(ref.mean), rstd = Rounded(ref.rstd);
          const RefNormGrads want = RefNormBackward(gy, x, with_w ? &w : nullptr, mean, rstd, rms);
          const NormBackward<P> grads =
              Vulkan::norm_last_backward(Up(gy), xv, with_w ? &wv : nullptr, Up(mean), Up(rstd), rms, with_b);
          ExpectClose(grads.x_grad, want.x);
          if (with_w) {
            ExpectClose(grads.weight_grad, want.weight);
          } else {
            EXPECT_EQ(grads.weight_grad.buffer, nullptr);  // default-constructed: not asked for
          }
          if (with_b) {
            ExpectClose(grads.bias_grad, want.bias);
          } else {
            EXPECT_EQ(grads.bias_grad.buffer, nullptr);
          }
        }
      }
    }
  }

  void CheckGelu(const Host& x, const P& xv) {
    for (bool tanh : {false, true}) {
      SCOPED_TRACE(tanh ? "tanh" : "erf");
      Host y = Zeros(x.shape), dy = Zeros(x.shape);
      const Host gy = Random(x.shape, -1, 1, 21);
      for (size_t i = 0; i < x.v.size(); ++i) {
        y.v[i] = RefGelu(x.v[i], tanh);
        dy.v[i] = gy.v[i] * RefGeluGrad(x.v[i], tanh);
      }
      ExpectClose(Vulkan::gelu(xv, tanh), y);
      ExpectClose(Vulkan::gelu_backward(xv, Up(gy), tanh), dy);
    }
  }

  void CheckCrossEntropy(const Host& x, const P& xv, const std::vector<int64_t>& t, int64_t ignore) {
    for (double s : {0.0, 0.1}) {
      SCOPED_TRACE(::testing::Message() << "smoothing " << s);
      const RefCe ref = RefCrossEntropy(x, t, ignore, s);
      const CrossEntropyForward<P> got = Vulkan::cross_entropy_rows(xv, Targets(t), ignore, s);
      ExpectClose(got.loss, ref.loss);
      ExpectClose(got.lse, ref.lse);
      const Host lse = Rounded(ref.lse), g = Random({x.shape[0]}, 0.5, 2, 31);
      ExpectClose(Vulkan::cross_entropy_rows_backward(xv, Targets(t), Up(lse), Up(g), ignore, s),
                  RefCrossEntropyBackward(x, t, lse, g, ignore, s));
    }
  }
};

struct TypeNames {
  template <class T>
  static std::string GetName(int) {
    return DTypeName(DTypeOf<T>());
  }
};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(FusedTest, FloatTypes, TypeNames);

// The exact GELU stands on math.glsl's erf: a few ulp over the whole line, tails included.
TYPED_TEST(FusedTest, ErfIsAccurateOverTheWholeLine) {
  Host x = Zeros({4 * 2001});
  for (int64_t i = 0; i <= 2000; ++i) {
    x.v[i] = static_cast<TypeParam>(-8 + 0.008 * i);
    x.v[2001 + i] = static_cast<TypeParam>(std::ldexp(1.0, -60 + static_cast<int>(i % 60)) * (1 + i / 2001.0));
    x.v[2 * 2001 + i] = -x.v[2001 + i];
    x.v[3 * 2001 + i] = static_cast<TypeParam>(1.4 + 0.7 * i / 2000);  // where the two methods meet
  }
  const TensorData got = Vulkan::to_data(Vulkan::unary(UnaryOp::kErf, this->Up(x)));
  const double tol = sizeof(TypeParam) == 4 ? 1e-6 : 1e-14;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double want = std::erf(static_cast<long double>(x.v[i]));
    EXPECT_LE(std::abs(got.AsDouble(i) - want), tol * std::abs(want)) << "erf(" << x.v[i] << ")";
  }
}

TYPED_TEST(FusedTest, SoftmaxMatchesTheReference) {
  const Host x = this->Random({3, 5, 7});
  this->CheckSoftmax(x, this->Up(x), false);
}

TYPED_TEST(FusedTest, CausalSoftmaxWithMoreKeysThanQueries) {
  const Host x = this->Random({2, 3, 6, 9});  // sq = 6 < sk = 9: row i keeps j <= i + 3
  this->CheckSoftmax(x, this->Up(x), true);
  const TensorData y = Vulkan::to_data(Vulkan::softmax_last(this->Up(x), false, true));
  EXPECT_EQ(y.AsDouble(4), 0);  // row 0 keeps columns 0..3
  EXPECT_GT(y.AsDouble(3), 0);
}

TYPED_TEST(FusedTest, CausalSoftmaxWithMoreQueriesThanKeysHasNaNRows) {
  const Host x = this->Random({2, 9, 6});  // sq = 9 > sk = 6: rows 0..2 keep nothing
  this->CheckSoftmax(x, this->Up(x), true);
  for (bool log : {false, true}) {
    const TensorData y = Vulkan::to_data(Vulkan::softmax_last(this->Up(x), log, true));
    EXPECT_TRUE(std::isnan(y.AsDouble(2 * 6 + 5)));  // row 2: fully masked
    EXPECT_FALSE(std::isnan(y.AsDouble(3 * 6)));     // row 3 keeps column 0
    EXPECT_EQ(y.AsDouble(3 * 6 + 1), log ? -kInf : 0);
    // The gradient of a masked position is 0, fully masked rows included.
    const Host gy = this->Random({2, 9, 6}, -1, 1, 3);
    const TensorData gx = Vulkan::to_data(
        Vulkan::softmax_last_backward(Vulkan::softmax_last(this->Up(x), log, true), this->Up(gy), log, true));
    for (int64_t j = 0; j < 6; ++j) EXPECT_EQ(gx.AsDouble(j), 0);
    EXPECT_EQ(gx.AsDouble(3 * 6 + 1), 0);
  }
}

TYPED_TEST(FusedTest, StridedInputs) {
  const Host x = this->Random({5, 7});
  this->CheckSoftmax(x, this->UpTransposed(x), false);
  this->CheckNorm(x, this->UpTransposed(x));
  this->CheckGelu(x, this->UpTransposed(x));
  this->CheckCrossEntropy(x, this->UpTransposed(x), {0, 6, -100, 3, 2}, -100);
  // Strided second operands too.
  const Host y = this->Rounded(RefSoftmax(x, false, false)), gy = this->Random({5, 7}, -1, 1, 9);
  this->ExpectClose(Vulkan::softmax_last_backward(this->UpTransposed(y), this->UpTransposed(gy), false, false),
                    RefSoftmaxBackward(y, gy, false, false));
}

TYPED_TEST(FusedTest, NormsMatchTheReference) {
  const Host x = this->Random({3, 5, 7}, -2, 4);  // a mean away from 0
  this->CheckNorm(x, this->Up(x));
}

TYPED_TEST(FusedTest, NormParameterGradientsSpanSeveralChunksAndRepeatExactly) {
  // 150 rows: partial sums over three chunks of rows, then over the chunks.
  const Host x = this->Random({150, 33}, -2, 2, 41), gy = this->Random({150, 33}, -1, 1, 42);
  const Host w = this->Random({33}, 0.5, 1.5, 43);
  const P xv = this->Up(x), wv = this->Up(w), gv = this->Up(gy);
  const NormForward<P> f = Vulkan::norm_last(xv, &wv, nullptr, 1e-5, false);
  const Host mean = this->Rounded(RefNormForward(x, &w, nullptr, 1e-5, false).mean);
  const Host rstd = this->Rounded(RefNormForward(x, &w, nullptr, 1e-5, false).rstd);
  const RefNormGrads want = RefNormBackward(gy, x, &w, mean, rstd, false);
  const NormBackward<P> a = Vulkan::norm_last_backward(gv, xv, &wv, this->Up(mean), this->Up(rstd), false, true);
  this->ExpectClose(a.weight_grad, want.weight);
  this->ExpectClose(a.bias_grad, want.bias);
  const NormBackward<P> b = Vulkan::norm_last_backward(gv, xv, &wv, f.mean, f.rstd, false, true);
  const NormBackward<P> c = Vulkan::norm_last_backward(gv, xv, &wv, f.mean, f.rstd, false, true);
  EXPECT_EQ(Vulkan::to_data(b.weight_grad).ToDoubles(), Vulkan::to_data(c.weight_grad).ToDoubles());
  EXPECT_EQ(Vulkan::to_data(b.bias_grad).ToDoubles(), Vulkan::to_data(c.bias_grad).ToDoubles());
}

TYPED_TEST(FusedTest, GeluMatchesTheReference) {
  const Host x = this->Random({3, 5, 7}, -6, 6);
  this->CheckGelu(x, this->Up(x));
}

TYPED_TEST(FusedTest, CrossEntropyMatchesTheReference) {
  const Host x = this->Random({6, 7});
  this->CheckCrossEntropy(x, this->Up(x), {0, 6, -100, 3, -100, 2}, -100);
  // An ignore_index inside [0, C): rows with target 3 are ignored.
  this->CheckCrossEntropy(x, this->Up(x), {0, 6, 3, 3, 1, 2}, 3);
}

TYPED_TEST(FusedTest, LongRows) {
  const Host x = this->Random({2, 5000}, -4, 4, 51);
  this->CheckSoftmax(x, this->Up(x), false);
  this->CheckNorm(x, this->Up(x));
  this->CheckCrossEntropy(x, this->Up(x), {4999, 17}, -100);
  const Host wide = this->Random({1, 50000}, -4, 4, 52);
  this->ExpectClose(Vulkan::softmax_last(this->Up(wide), true, false), RefSoftmax(wide, true, false));
}

// More rows than one grid dimension holds (65,535 workgroups on most devices): the launch
// spills into y, and the spare workgroups must write nothing.
TYPED_TEST(FusedTest, ManyRows) {
  const Host x = this->Random({70000, 3}, -3, 3, 61);
  this->ExpectClose(Vulkan::softmax_last(this->Up(x), false, false), RefSoftmax(x, false, false));
}

TYPED_TEST(FusedTest, EmptyInputs) {
  const Host x = Zeros({0, 7});
  this->CheckSoftmax(x, this->Up(x), false);
  this->CheckSoftmax(x, this->Up(x), true);
  this->CheckGelu(x, this->Up(x));
  this->CheckNorm(x, this->Up(x));  // [0] statistics; parameter gradients are zeros [7]
  this->CheckCrossEntropy(x, this->Up(x), {}, -100);
  // Rows of length 0: nothing to normalise, so mean and rstd are 0 / 0.
  const NormForward<P> f = Vulkan::norm_last(this->Up(Zeros({3, 0})), nullptr, nullptr, 1e-5, false);
  EXPECT_EQ(f.y.shape, Shape({3, 0}));
  EXPECT_TRUE(std::isnan(Vulkan::to_data(f.mean).AsDouble(2)));
  EXPECT_EQ(Vulkan::softmax_last(this->Up(Zeros({3, 0})), false, false).shape, Shape({3, 0}));
}

TYPED_TEST(FusedTest, BadTargetsAreOutOfRange) {
  const Host x = this->Random({4, 5});
  const auto expect_error = [&](const P& targets, const std::string& message) {
    for (bool backward : {false, true}) {
      try {
        if (backward) {
          const P lse = this->Up(Zeros({4})), g = this->Up(Zeros({4}));
          (void)Vulkan::cross_entropy_rows_backward(this->Up(x), targets, lse, g, -100, 0.1);
        } else {
          (void)Vulkan::cross_entropy_rows(this->Up(x), targets, -100, 0.1);
        }
        ADD_FAILURE() << "no error for " << message;
      } catch (const Error& e) {
        EXPECT_EQ(e.status().code(), absl::StatusCode::kOutOfRange);
        EXPECT_EQ(e.status().message(), message);
      }
    }
  };
  expect_error(this->Targets({1, 5, 2, 7}), "cross_entropy: target 5 of row 1 is outside [0, 5)");
  expect_error(this->Targets({1, -100, -1, 0}), "cross_entropy: target -1 of row 2 is outside [0, 5)");
  // Targets made on the device have no known range: they are read back.
  const P ones = Vulkan::full(Shape({4}), Scalar(int64_t{1}), DType::kI64, VulkanDevice(0));
  const P computed = Vulkan::binary(BinaryOp::kAdd, this->Targets({0, 1, 2, 4}), ones);  // {1, 2, 3, 5}
  EXPECT_FALSE(computed.buffer->known_range.has_value());
  expect_error(computed, "cross_entropy: target 5 of row 3 is outside [0, 5)");
}

// The reference's softmax, layer norm and GELU agree with the CPU backend's plain ops.
TYPED_TEST(FusedTest, ReferenceAgreesWithTheCpuComposition) {
  using C = Tensor<Cpu>;
  const Host x = this->Random({4, 9});
  const C xc = C::from_data(this->Data(x));
  const auto expect = [&](const C& got, const Host& want) {
    const TensorData d = got.to_data();
    ASSERT_EQ(d.numel(), static_cast<int64_t>(want.v.size()));
    for (int64_t i = 0; i < d.numel(); ++i) EXPECT_NEAR(d.AsDouble(i), want.v[i], 1e3 * this->kTol) << i;
  };
  expect(xc.softmax(-1), RefSoftmax(x, false, false));
  expect(xc.log_softmax(-1), RefSoftmax(x, true, false));
  const C centred = xc - xc.mean({-1}, true);
  expect(centred / ((centred * centred).mean({-1}, true) + 1e-5).sqrt(),
         RefNormForward(x, nullptr, nullptr, 1e-5, false).y);
  Host g = Zeros(x.shape);
  for (size_t i = 0; i < x.v.size(); ++i) g.v[i] = RefGelu(x.v[i], false);
  expect(xc * ((xc * M_SQRT1_2).erf() + 1) * 0.5, g);
}

}  // namespace
}  // namespace kiln
