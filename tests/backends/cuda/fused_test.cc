// The CUDA backend's fused kernels (tensor/fused_ops.h) against f64 references written here as
// plain loops, in f32 and f64: shapes that fit one warp, long rows, empty tensors, strided
// views, causal masks (sq != sk, and rows with every column masked), norms with and without
// weight and bias, cross-entropy with ignored rows, smoothing and bad targets. The device
// cases skip without a GPU; the references' own derivatives are checked against finite
// differences everywhere, so the backward formulas the kernels share are checked too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_backend.h"
#include "tensor/error.h"
#include "tests/backends.h"

namespace kiln {
namespace {

using P = Cuda::Primitive;
using Vec = std::vector<double>;
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr DType kDTypes[] = {DType::kF32, DType::kF64};

// Values as the dtype holds them, so the reference sees the device's inputs.
Vec Round(Vec v, DType dtype) {
  if (dtype == DType::kF32)
    for (double& x : v) x = static_cast<float>(x);
  return v;
}

Vec Random(int64_t n, DType dtype, uint32_t seed, double lo = -3, double hi = 3) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  Vec v(static_cast<size_t>(n));
  for (double& x : v) x = dist(gen);
  return Round(std::move(v), dtype);
}

P Upload(const Vec& v, const Shape& shape, DType dtype) {
  if (dtype == DType::kF32) {
    return Cuda::from_data(TensorData::FromVector(std::vector<float>(v.begin(), v.end()), shape), CudaDevice(0));
  }
  return Cuda::from_data(TensorData::FromVector(v, shape), CudaDevice(0));
}

P UploadTargets(const std::vector<int64_t>& t) {
  return Cuda::from_data(TensorData::FromVector(t, Shape{static_cast<int64_t>(t.size())}), CudaDevice(0));
}

Vec Download(const P& p) { return Cuda::to_data(p).ToDoubles(); }

// [a, b, c] row-major -> [a, c, b] row-major.
Vec SwapLast(const Vec& v, int64_t a, int64_t b, int64_t c) {
  Vec out(v.size());
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t k = 0; k < c; ++k) out[(i * c + k) * b + j] = v[(i * b + j) * c + k];
  return out;
}

// x (logically `shape` = [a, b, c]) as a transposed view: stored [a, c, b] and permuted back.
P UploadTransposed(const Vec& x, const Shape& shape, DType dtype) {
  const P stored = Upload(SwapLast(x, shape[0], shape[1], shape[2]), Shape{shape[0], shape[2], shape[1]}, dtype);
  const P view = Cuda::permute(stored, {0, 2, 1});
  EXPECT_FALSE(view.IsContiguous());
  return view;
}

// NaN matches NaN, infinities match exactly, the rest within the dtype's tolerance.
void ExpectClose(const P& actual, const Vec& expected, const Shape& shape, DType dtype, const std::string& what) {
  EXPECT_EQ(actual.shape.ToString(), shape.ToString()) << what;
  EXPECT_EQ(actual.dtype, dtype) << what;
  EXPECT_TRUE(actual.IsContiguous()) << what;
  const Vec a = Download(actual);
  ASSERT_EQ(a.size(), expected.size()) << what;
  const double atol = dtype == DType::kF32 ? 3e-5 : 1e-11;
  const double rtol = dtype == DType::kF32 ? 3e-4 : 1e-10;
  int bad = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double e = expected[i];
    const bool ok = std::isnan(e)   ? std::isnan(a[i])
                    : std::isinf(e) ? a[i] == e
                                    : std::abs(a[i] - e) <= atol + rtol * std::abs(e);
    if (!ok && ++bad <= 5) ADD_FAILURE() << what << " [" << i << "]: got " << a[i] << ", want " << e;
  }
  EXPECT_EQ(bad, 0) << what << ": elements off";
}

struct RowsOf {
  int64_t rows, n;
  explicit RowsOf(const Shape& s) : rows(1), n(s[s.rank() - 1]) {
    for (int64_t i = 0; i + 1 < s.rank(); ++i) rows *= s[i];
  }
};

// ---- references (f64, plain loops, the formulas of tensor/fused_ops.h) ----

int64_t Kept(int64_t r, int64_t n, int64_t sq, bool causal) {
  if (!causal) return n;
  return std::clamp<int64_t>(r % sq + n - sq + 1, 0, n);
}

Vec RefSoftmax(const Vec& x, const Shape& s, bool log, bool causal) {
  const RowsOf l(s);
  const int64_t sq = causal ? s[s.rank() - 2] : 1;
  Vec y(x.size());
  for (int64_t r = 0; r < l.rows; ++r) {
    const double* xr = x.data() + r * l.n;
    double* yr = y.data() + r * l.n;
    const int64_t kept = Kept(r, l.n, sq, causal);
    if (kept == 0) {
      for (int64_t j = 0; j < l.n; ++j) yr[j] = kNan;
      continue;
    }
    double m = -kInf, sum = 0;
    for (int64_t j = 0; j < kept; ++j) m = std::max(m, xr[j]);
    for (int64_t j = 0; j < kept; ++j) sum += std::exp(xr[j] - m);
    for (int64_t j = 0; j < l.n; ++j) {
      if (j < kept)
        yr[j] = log ? xr[j] - m - std::log(sum) : std::exp(xr[j] - m) / sum;
      else
        yr[j] = log ? -kInf : 0;
    }
  }
  return y;
}

Vec RefSoftmaxBackward(const Vec& y, const Vec& gy, const Shape& s, bool log, bool causal) {
  const RowsOf l(s);
  const int64_t sq = causal ? s[s.rank() - 2] : 1;
  Vec gx(y.size(), 0.0);
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t kept = Kept(r, l.n, sq, causal), o = r * l.n;
    double sum = 0;
    for (int64_t j = 0; j < kept; ++j) sum += log ? gy[o + j] : gy[o + j] * y[o + j];
    for (int64_t j = 0; j < kept; ++j) {
      gx[o + j] = log ? gy[o + j] - std::exp(y[o + j]) * sum : y[o + j] * (gy[o + j] - sum);
    }
  }
  return gx;
}

struct RefNorm {
  Vec y, mean, rstd;
};
RefNorm RefNormForward(const Vec& x, const Shape& s, const Vec* w, const Vec* b, double eps, bool rms) {
  const RowsOf l(s);
  RefNorm out{Vec(x.size()), Vec(l.rows), Vec(l.rows)};
  for (int64_t r = 0; r < l.rows; ++r) {
    const double* xr = x.data() + r * l.n;
    double mu = 0, ss = 0;
    if (!rms) {
      for (int64_t j = 0; j < l.n; ++j) mu += xr[j];
      mu /= l.n;
    }
    for (int64_t j = 0; j < l.n; ++j) ss += (xr[j] - mu) * (xr[j] - mu);
    const double rs = 1 / std::sqrt(ss / l.n + eps);
    out.mean[r] = rms ? rs : mu;
    out.rstd[r] = rs;
    for (int64_t j = 0; j < l.n; ++j) {
      double v = (xr[j] - mu) * rs;
      if (w) v *= (*w)[j];
      if (b) v += (*b)[j];
      out.y[r * l.n + j] = v;
    }
  }
  return out;
}

struct RefNormGrad {
  Vec x, weight, bias;
};
RefNormGrad RefNormBackward(const Vec& gy, const Vec& x, const Shape& s, const Vec* w, const Vec& mean, const Vec& rstd,
                            bool rms) {
  const RowsOf l(s);
  RefNormGrad out{Vec(x.size()), Vec(l.n, 0.0), Vec(l.n, 0.0)};
  for (int64_t r = 0; r < l.rows; ++r) {
    const int64_t o = r * l.n;
    const double mu = rms ? 0 : mean[r], rs = rstd[r];
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < l.n; ++j) {
      const double g = gy[o + j] * (w ? (*w)[j] : 1), xh = (x[o + j] - mu) * rs;
      sg += g;
      sgx += g * xh;
      out.weight[j] += gy[o + j] * xh;
      out.bias[j] += gy[o + j];
    }
    const double mg = rms ? 0 : sg / l.n, mgx = sgx / l.n;
    for (int64_t j = 0; j < l.n; ++j) {
      const double g = gy[o + j] * (w ? (*w)[j] : 1), xh = (x[o + j] - mu) * rs;
      out.x[o + j] = rs * (g - mg - xh * mgx);
    }
  }
  return out;
}

double RefGelu(double x, bool tanh_form) {
  if (tanh_form) return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
double RefGeluDerivative(double x, bool tanh_form) {
  if (tanh_form) {
    const double k = std::sqrt(2 / std::numbers::pi), t = std::tanh(k * (x + 0.044715 * x * x * x));
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x);
  }
  return 0.5 * (1 + std::erf(x / std::sqrt(2.0))) + x * std::exp(-0.5 * x * x) / std::sqrt(2 * std::numbers::pi);
}

struct RefCe {
  Vec loss, lse;
};
RefCe RefCrossEntropy(const Vec& x, const std::vector<int64_t>& t, int64_t classes, int64_t ignore, double s) {
  const int64_t n = static_cast<int64_t>(t.size());
  RefCe out{Vec(n), Vec(n)};
  for (int64_t r = 0; r < n; ++r) {
    const double* xr = x.data() + r * classes;
    double m = -kInf, sum = 0, sx = 0;
    for (int64_t j = 0; j < classes; ++j) m = std::max(m, xr[j]);
    for (int64_t j = 0; j < classes; ++j) {
      sum += std::exp(xr[j] - m);
      sx += xr[j];
    }
    out.lse[r] = m + std::log(sum);
    out.loss[r] = t[r] == ignore ? 0 : out.lse[r] - (1 - s) * xr[t[r]] - s / classes * sx;
  }
  return out;
}

Vec RefCrossEntropyBackward(const Vec& x, const std::vector<int64_t>& t, const Vec& lse, const Vec& g, int64_t classes,
                            int64_t ignore, double s) {
  Vec gx(x.size(), 0.0);
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore) continue;
    for (int64_t j = 0; j < classes; ++j) {
      const int64_t i = static_cast<int64_t>(r) * classes + j;
      gx[i] = g[r] * (std::exp(x[i] - lse[r]) - (j == t[r] ? 1 - s : 0) - s / classes);
    }
  }
  return gx;
}

// ---- the references' derivatives against central differences of their forwards (no GPU) ----

// d/dx_i of sum_k gy_k f(x)_k, numerically.
Vec NumericVjp(const std::function<Vec(const Vec&)>& f, const Vec& x, const Vec& gy) {
  Vec grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    Vec hi = x, lo = x;
    const double h = 1e-6;
    hi[i] += h;
    lo[i] -= h;
    const Vec fh = f(hi), fl = f(lo);
    double d = 0;
    for (size_t k = 0; k < fh.size(); ++k) {
      if (std::isfinite(fh[k]) && std::isfinite(fl[k])) d += gy[k] * (fh[k] - fl[k]) / (2 * h);
    }
    grad[i] = d;
  }
  return grad;
}

void ExpectVecNear(const Vec& a, const Vec& b, double tol, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << what << " [" << i << "]";
}

TEST(CudaFusedReference, SoftmaxBackwardIsTheForwardsDerivative) {
  for (const bool log : {false, true}) {
    for (const bool causal : {false, true}) {
      const Shape s{2, 4, 5};  // causal: row i keeps j <= i + 1
      const Vec x = Random(40, DType::kF64, 1), gy = Random(40, DType::kF64, 2);
      const auto f = [&](const Vec& v) { return RefSoftmax(v, s, log, causal); };
      Vec expected = RefSoftmaxBackward(f(x), gy, s, log, causal);
      ExpectVecNear(expected, NumericVjp(f, x, gy), 1e-6, absl::StrCat(log ? "log" : "plain", causal ? " causal" : ""));
    }
  }
}

TEST(CudaFusedReference, NormBackwardIsTheForwardsDerivative) {
  const Shape s{3, 6};
  const Vec x = Random(18, DType::kF64, 3), gy = Random(18, DType::kF64, 4), w = Random(6, DType::kF64, 5);
  for (const bool rms : {false, true}) {
    const RefNorm fwd = RefNormForward(x, s, &w, nullptr, 1e-5, rms);
    const RefNormGrad g = RefNormBackward(gy, x, s, &w, fwd.mean, fwd.rstd, rms);
    const auto fx = [&](const Vec& v) { return RefNormForward(v, s, &w, nullptr, 1e-5, rms).y; };
    ExpectVecNear(g.x, NumericVjp(fx, x, gy), 1e-6, rms ? "x, rms" : "x, layer");
    const auto fw = [&](const Vec& v) { return RefNormForward(x, s, &v, nullptr, 1e-5, rms).y; };
    ExpectVecNear(g.weight, NumericVjp(fw, w, gy), 1e-6, rms ? "weight, rms" : "weight, layer");
  }
}

TEST(CudaFusedReference, GeluDerivativeMatchesFiniteDifferences) {
  for (const bool tanh_form : {false, true}) {
    for (double x = -5; x <= 5; x += 0.25) {
      const double numeric = (RefGelu(x + 1e-6, tanh_form) - RefGelu(x - 1e-6, tanh_form)) / 2e-6;
      EXPECT_NEAR(RefGeluDerivative(x, tanh_form), numeric, 1e-7) << "x " << x << " tanh " << tanh_form;
    }
  }
}

TEST(CudaFusedReference, CrossEntropyBackwardIsTheLossDerivative) {
  const std::vector<int64_t> t = {2, -100, 0};
  const Vec x = Random(15, DType::kF64, 6), g = {0.5, 2.0, -1.5};
  for (const double s : {0.0, 0.1}) {
    const RefCe fwd = RefCrossEntropy(x, t, 5, -100, s);
    const auto f = [&](const Vec& v) { return RefCrossEntropy(v, t, 5, -100, s).loss; };
    ExpectVecNear(RefCrossEntropyBackward(x, t, fwd.lse, g, 5, -100, s), NumericVjp(f, x, g), 1e-6,
                  absl::StrCat("smoothing ", s));
  }
}

// ---- the device ----

struct Case {
  Shape shape;
  bool causal = false;
  bool transposed = false;  // pass x (and gy) as strided views; rank 3
};

std::string Name(const Case& c, DType dtype) {
  return absl::StrCat(DTypeName(dtype), " ", c.shape.ToString(), c.causal ? " causal" : "",
                      c.transposed ? " transposed" : "");
}

P UploadCase(const Vec& v, const Case& c, DType dtype) {
  return c.transposed ? UploadTransposed(v, c.shape, dtype) : Upload(v, c.shape, dtype);
}

TEST(CudaFused, SoftmaxAndItsBackward) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  const Case cases[] = {
      {Shape{3, 5, 7}},
      {Shape{3, 5, 7}, false, true},
      {Shape{2, 3, 6, 9}, true},     // sq = 6 < sk = 9: row i keeps j <= i + 3
      {Shape{2, 9, 6}, true},        // sq = 9 > sk = 6: rows 0-2 keep nothing (NaN)
      {Shape{2, 7, 5}, true, true},  // a causal strided view
      {Shape{3, 5000}},              // rows longer than a block
      {Shape{0, 7}},
      {Shape{4, 0}},
  };
  for (const DType dtype : kDTypes) {
    for (const Case& c : cases) {
      for (const bool log : {false, true}) {
        const std::string what = absl::StrCat(log ? "log_softmax " : "softmax ", Name(c, dtype));
        SCOPED_TRACE(what);
        const int64_t n = c.shape.numel();
        const Vec x = Random(n, dtype, 11);
        const Vec y = RefSoftmax(x, c.shape, log, c.causal);
        ExpectClose(Cuda::softmax_last(UploadCase(x, c, dtype), log, c.causal), y, c.shape, dtype, what);
        const Vec yin = Round(y, dtype), gy = Random(n, dtype, 12);
        const P gx = Cuda::softmax_last_backward(Upload(yin, c.shape, dtype), UploadCase(gy, c, dtype), log, c.causal);
        ExpectClose(gx, RefSoftmaxBackward(yin, gy, c.shape, log, c.causal), c.shape, dtype, what + " backward");
      }
    }
  }
}

TEST(CudaFused, NormsAndTheirBackward) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  const Case cases[] = {
      {Shape{3, 5, 7}}, {Shape{3, 5, 7}, false, true}, {Shape{3, 5000}}, {Shape{300, 7}},  // 300 rows: 5 chunks
      {Shape{0, 7}},
  };
  constexpr double kEps = 1e-5;
  for (const DType dtype : kDTypes) {
    for (const Case& c : cases) {
      for (const bool rms : {false, true}) {
        for (const auto& [has_w, has_b] :
             {std::pair{false, false}, std::pair{true, false}, std::pair{false, true}, std::pair{true, true}}) {
          const std::string what = absl::StrCat(rms ? "rms_norm " : "layer_norm ", Name(c, dtype),
                                                has_w ? " weight" : "", has_b ? " bias" : "");
          SCOPED_TRACE(what);
          const RowsOf l(c.shape);
          const Shape stats = c.shape.rank() == 3 ? Shape{c.shape[0], c.shape[1]} : Shape{c.shape[0]};
          const Vec x = Random(c.shape.numel(), dtype, 21), w = Random(l.n, dtype, 22, 0.5, 1.5),
                    b = Random(l.n, dtype, 23);
          const P pw = Upload(w, Shape{l.n}, dtype), pb = Upload(b, Shape{l.n}, dtype);
          const RefNorm ref = RefNormForward(x, c.shape, has_w ? &w : nullptr, has_b ? &b : nullptr, kEps, rms);
          const NormForward<P> fwd =
              Cuda::norm_last(UploadCase(x, c, dtype), has_w ? &pw : nullptr, has_b ? &pb : nullptr, kEps, rms);
          ExpectClose(fwd.y, ref.y, c.shape, dtype, what + " y");
          ExpectClose(fwd.mean, ref.mean, stats, dtype, what + " mean");
          ExpectClose(fwd.rstd, ref.rstd, stats, dtype, what + " rstd");

          // The backward from the reference's statistics as the dtype holds them.
          const Vec mean = Round(ref.mean, dtype), rstd = Round(ref.rstd, dtype), gy = Random(x.size(), dtype, 24);
          const auto backward = [&] {
            return Cuda::norm_last_backward(UploadCase(gy, c, dtype), UploadCase(x, c, dtype), has_w ? &pw : nullptr,
                                            Upload(mean, stats, dtype), Upload(rstd, stats, dtype), rms, has_b);
          };
          const NormBackward<P> g = backward();
          const RefNormGrad rg = RefNormBackward(gy, x, c.shape, has_w ? &w : nullptr, mean, rstd, rms);
          ExpectClose(g.x_grad, rg.x, c.shape, dtype, what + " x_grad");
          if (has_w) {
            ExpectClose(g.weight_grad, rg.weight, Shape{l.n}, dtype, what + " weight_grad");
          } else {
            EXPECT_TRUE(g.weight_grad.buffer == nullptr) << "weight_grad without a weight";
          }
          if (has_b) {
            ExpectClose(g.bias_grad, rg.bias, Shape{l.n}, dtype, what + " bias_grad");
          } else {
            EXPECT_TRUE(g.bias_grad.buffer == nullptr) << "bias_grad not asked for";
          }
          if (has_w && has_b) {  // the column sums are the same bits every time
            const NormBackward<P> again = backward();
            EXPECT_EQ(Download(again.weight_grad), Download(g.weight_grad));
            EXPECT_EQ(Download(again.bias_grad), Download(g.bias_grad));
          }
        }
      }
    }
  }
}

TEST(CudaFused, GeluAndItsBackward) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  const Case cases[] = {{Shape{3, 5, 7}}, {Shape{3, 5, 7}, false, true}, {Shape{3, 5000}}, {Shape{0, 7}}};
  for (const DType dtype : kDTypes) {
    for (const Case& c : cases) {
      for (const bool tanh_form : {false, true}) {
        const std::string what = absl::StrCat(tanh_form ? "gelu tanh " : "gelu ", Name(c, dtype));
        SCOPED_TRACE(what);
        const Vec x = Random(c.shape.numel(), dtype, 31, -5, 5), gy = Random(c.shape.numel(), dtype, 32);
        Vec y(x.size()), gx(x.size());
        for (size_t i = 0; i < x.size(); ++i) {
          y[i] = RefGelu(x[i], tanh_form);
          gx[i] = gy[i] * RefGeluDerivative(x[i], tanh_form);
        }
        ExpectClose(Cuda::gelu(UploadCase(x, c, dtype), tanh_form), y, c.shape, dtype, what);
        ExpectClose(Cuda::gelu_backward(UploadCase(x, c, dtype), UploadCase(gy, c, dtype), tanh_form), gx, c.shape,
                    dtype, what + " backward");
      }
    }
  }
}

TEST(CudaFused, CrossEntropyAndItsBackward) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  constexpr int64_t kIgnore = -100;
  struct CeCase {
    int64_t rows, classes;
    std::vector<int64_t> targets;
    bool transposed;
  };
  const CeCase cases[] = {
      {6, 7, {3, kIgnore, 0, 6, kIgnore, 2}, false},
      {6, 7, {3, kIgnore, 0, 6, kIgnore, 2}, true},  // logits a transposed view
      {3, 5000, {4999, 0, 1234}, false},
      {0, 7, {}, false},
  };
  for (const DType dtype : kDTypes) {
    for (const CeCase& c : cases) {
      for (const double s : {0.0, 0.1}) {
        const std::string what = absl::StrCat("cross_entropy ", DTypeName(dtype), " [", c.rows, ",", c.classes, "]",
                                              c.transposed ? " transposed" : "", " smoothing ", s);
        SCOPED_TRACE(what);
        const Shape shape{c.rows, c.classes}, rows{c.rows};
        const Vec x = Random(shape.numel(), dtype, 41);
        P logits = Upload(x, shape, dtype);
        if (c.transposed) {  // stored [C, N], viewed as [N, C]
          Vec stored(x.size());
          for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t j = 0; j < c.classes; ++j) stored[j * c.rows + r] = x[r * c.classes + j];
          logits = Cuda::permute(Upload(stored, Shape{c.classes, c.rows}, dtype), {1, 0});
          EXPECT_FALSE(logits.IsContiguous());
        }
        const P targets = UploadTargets(c.targets);
        const RefCe ref = RefCrossEntropy(x, c.targets, c.classes, kIgnore, s);
        const CrossEntropyForward<P> fwd = Cuda::cross_entropy_rows(logits, targets, kIgnore, s);
        ExpectClose(fwd.loss, ref.loss, rows, dtype, what + " loss");
        ExpectClose(fwd.lse, ref.lse, rows, dtype, what + " lse");
        const Vec lse = Round(ref.lse, dtype), g = Random(c.rows, dtype, 42);
        const P gx = Cuda::cross_entropy_rows_backward(logits, targets, Upload(lse, rows, dtype),
                                                       Upload(g, rows, dtype), kIgnore, s);
        ExpectClose(gx, RefCrossEntropyBackward(x, c.targets, lse, g, c.classes, kIgnore, s), shape, dtype,
                    what + " backward");
      }
    }
  }
}

TEST(CudaFused, CrossEntropyNamesTheFirstBadTarget) {
  KILN_SKIP_IF_UNAVAILABLE(Cuda);
  for (const DType dtype : kDTypes) {
    const P logits = Upload(Random(28, dtype, 51), Shape{4, 7}, dtype);
    const auto message = [&](const std::vector<int64_t>& t) -> std::string {
      try {
        (void)Cuda::cross_entropy_rows(logits, UploadTargets(t), -100, 0.0);
      } catch (const Error& e) {
        EXPECT_EQ(e.code(), absl::StatusCode::kOutOfRange);
        return std::string(e.status().message());
      }
      return "no error";
    };
    EXPECT_EQ(message({1, -100, 9, -5}), "cross_entropy: target 9 of row 2 is outside [0, 7)");
    EXPECT_EQ(message({-1, 7, 0, 0}), "cross_entropy: target -1 of row 0 is outside [0, 7)");
    EXPECT_EQ(message({0, 1, 2, 7}), "cross_entropy: target 7 of row 3 is outside [0, 7)");
    EXPECT_EQ(message({0, -100, 6, -100}), "no error");  // ignored and in-range targets pass
  }
}

}  // namespace
}  // namespace kiln
