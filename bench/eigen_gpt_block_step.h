// One training step of a GPT-2 pre-LN transformer block (nn/transformer_block.h) written
// directly in Eigen, no framework: the limit kiln's block step is measured against. Forward
// (layer norms, fused qkv projection, causal softmax attention per head, output projection,
// residuals, MLP with the tanh GELU), the mean squared error to a fixed target, the backward
// by hand, and AdamW, all on matrices allocated once. As bench/eigen_mlp_step.h: on one thread
// the GEMMs are Eigen's matrix products; on more, Eigen's tensor contraction on a
// ThreadPoolDevice, and the row-wise passes and the heads are split over the same pool (no
// OpenMP, which would change Eigen's inline code under kiln's feet in the same binary).
#ifndef KILN_BENCH_EIGEN_GPT_BLOCK_STEP_H_
#define KILN_BENCH_EIGEN_GPT_BLOCK_STEP_H_

// Eigen's thread pool (as backends/cpu/cpu_device.cc and tensor_bench.cc use it).
#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "Eigen/Core"
#include "bench/eigen_gemm.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace kiln::bench {

struct GptBlockShape {
  int64_t batch, seq, width, heads;
};

// AdamW as examples/gpt trains (betas 0.9 / 0.99, decay on the linear layers' weights only).
struct GptBlockAdamW {
  float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.99f, eps = 1e-8f, weight_decay = 0.1f;
};

class EigenGptBlockStep {
 public:
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  // A parameter under kiln's name and in its layout: weights [out, in], vectors [1, n].
  struct Param {
    std::string name;
    Mat value, grad, exp_avg, exp_avg_sq;
    bool decays;
  };

  // Weights as GPT-2 (and nn::Gpt with one layer) starts them, N(0, 0.02^2), the projections
  // into the residual stream 0.02 / sqrt(2); zero biases, unit norm scales. Input and target
  // are [batch * seq, width], N(0, 1).
  EigenGptBlockStep(GptBlockShape shape, GptBlockAdamW adamw, int threads)
      : s_(shape),
        adamw_(adamw),
        rows_(shape.batch * shape.seq),
        pool_(threads),
        device_(&pool_, threads),
        threads_(threads) {
    const int64_t d = s_.width, f = 4 * d;
    const auto add = [&](Index i, const char* name, int64_t rows, int64_t cols, bool decays) {
      const Mat zero = Mat::Zero(rows, cols);
      params_[i] = {name, zero, zero, zero, zero, decays};
    };
    add(kLn1Weight, "ln_1.weight", 1, d, false);
    add(kLn1Bias, "ln_1.bias", 1, d, false);
    add(kQkvWeight, "attn.qkv.weight", 3 * d, d, true);
    add(kQkvBias, "attn.qkv.bias", 1, 3 * d, false);
    add(kAttnProjWeight, "attn.proj.weight", d, d, true);
    add(kAttnProjBias, "attn.proj.bias", 1, d, false);
    add(kLn2Weight, "ln_2.weight", 1, d, false);
    add(kLn2Bias, "ln_2.bias", 1, d, false);
    add(kFcWeight, "mlp.fc.weight", f, d, true);
    add(kFcBias, "mlp.fc.bias", 1, f, false);
    add(kMlpProjWeight, "mlp.proj.weight", d, f, true);
    add(kMlpProjBias, "mlp.proj.bias", 1, d, false);
    std::mt19937 gen(1);
    const auto normal = [&](Mat& m, float stddev) {
      std::normal_distribution<float> n(0, stddev);
      for (Index i = 0; i < m.size(); ++i) m.data()[i] = n(gen);
    };
    params_[kLn1Weight].value.setOnes();
    params_[kLn2Weight].value.setOnes();
    normal(params_[kQkvWeight].value, 0.02f);
    normal(params_[kFcWeight].value, 0.02f);
    normal(params_[kAttnProjWeight].value, 0.02f / std::sqrt(2.0f));
    normal(params_[kMlpProjWeight].value, 0.02f / std::sqrt(2.0f));
    x_.resize(rows_, d);
    target_.resize(rows_, d);
    normal(x_, 1);
    normal(target_, 1);

    for (Mat* m : {&xhat1_, &ln1_, &merged_, &h_, &xhat2_, &ln2_, &out_, &dout_, &dh_, &dmerged_}) m->resize(rows_, d);
    for (Mat* m : {&qkv_, &dqkv_}) m->resize(rows_, 3 * d);
    for (Mat* m : {&fc_, &gelu_, &dgelu_}) m->resize(rows_, f);
    rstd1_.resize(rows_);
    rstd2_.resize(rows_);
    probs_.resize(s_.batch * s_.heads * s_.seq, s_.seq);
    dprobs_.resize(threads_ * s_.seq, s_.seq);
    partials_.resize(threads_, 2 * f);
    tanh_.resize(threads_, f);
  }

  auto& params() { return params_; }
  Param* param(std::string_view name) {
    for (Param& p : params_) {
      if (p.name == name) return &p;
    }
    return nullptr;
  }
  Mat& input() { return x_; }
  Mat& target() { return target_; }

  // One step; returns the loss (before the update).
  float Step() {
    Forward();
    // Mean squared error over every element, and its gradient.
    dout_ = out_ - target_;
    const float n = static_cast<float>(dout_.size());
    const float loss = dout_.squaredNorm() / n;
    dout_ *= 2 / n;
    Backward();
    ++steps_;
    for (Param& p : params_) Update(p);
    return loss;
  }

 private:
  using Index = Eigen::Index;
  using Strided = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
  using ConstStrided = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
  using Flat = Eigen::Map<Eigen::ArrayXf>;
  using ConstFlat = Eigen::Map<const Eigen::ArrayXf>;
  enum : Index {
    kLn1Weight,
    kLn1Bias,
    kQkvWeight,
    kQkvBias,
    kAttnProjWeight,
    kAttnProjBias,
    kLn2Weight,
    kLn2Bias,
    kFcWeight,
    kFcBias,
    kMlpProjWeight,
    kMlpProjBias,
    kParams
  };
  static constexpr float kNormEps = 1e-5f;
  static constexpr float kSqrt2OverPi = 0.79788456080286535588f, kGeluCubic = 0.044715f;
  // Rows (or elements) below which a pass stays on the calling thread.
  static constexpr Index kRowsPerPart = 64, kElementsPerPart = 1 << 14;

  const Mat& W(Index i) const { return params_[i].value; }
  auto V(Index i) const { return params_[i].value.row(0); }

  void Forward() {
    LayerNorm(x_, kLn1Weight, xhat1_, rstd1_, ln1_);
    Gemm(ln1_, false, W(kQkvWeight), true, qkv_);
    Rows([&](int, Index begin, Index end) { qkv_.middleRows(begin, end - begin).rowwise() += V(kQkvBias); });
    Parallel(s_.batch * s_.heads, 1, [&](int, Index begin, Index end) {
      for (Index bh = begin; bh < end; ++bh) AttentionForward(bh / s_.heads, bh % s_.heads);
    });
    Gemm(merged_, false, W(kAttnProjWeight), true, h_);
    Rows([&](int, Index begin, Index end) {
      const Index n = end - begin;
      h_.middleRows(begin, n) = (h_.middleRows(begin, n) + x_.middleRows(begin, n)).rowwise() + V(kAttnProjBias);
    });
    LayerNorm(h_, kLn2Weight, xhat2_, rstd2_, ln2_);
    Gemm(ln2_, false, W(kFcWeight), true, fc_);
    Rows([&](int, Index begin, Index end) {
      auto f = fc_.middleRows(begin, end - begin);
      f.rowwise() += V(kFcBias);
      const auto v = f.array();
      gelu_.middleRows(begin, end - begin).array() =
          0.5f * v * (1.0f + (kSqrt2OverPi * (v + kGeluCubic * v.cube())).tanh());
    });
    Gemm(gelu_, false, W(kMlpProjWeight), true, out_);
    Rows([&](int, Index begin, Index end) {
      const Index n = end - begin;
      out_.middleRows(begin, n) = (out_.middleRows(begin, n) + h_.middleRows(begin, n)).rowwise() + V(kMlpProjBias);
    });
  }

  void Backward() {
    // out = h + proj(gelu(fc(ln_2(h)))): through the MLP, then add the residual's gradient.
    LinearBackward(dout_, gelu_, kMlpProjWeight, kMlpProjBias, &dgelu_);
    Rows([&](int part, Index begin, Index end) {
      auto th = tanh_.row(part).array();  // evaluated once per row, used twice
      for (Index r = begin; r < end; ++r) {
        const auto v = fc_.row(r).array();
        th = (kSqrt2OverPi * (v + kGeluCubic * v.cube())).tanh();
        dgelu_.row(r).array() *=
            0.5f * (1.0f + th) + 0.5f * v * (1.0f - th.square()) * kSqrt2OverPi * (1.0f + 3 * kGeluCubic * v.square());
      }
    });
    LinearBackward(dgelu_, ln2_, kFcWeight, kFcBias, &dh_);  // dh_: the gradient of ln_2's output
    LayerNormBackward(dh_, xhat2_, rstd2_, kLn2Weight, &dh_);
    dh_ += dout_;
    // h = x + proj(attention(ln_1(x))); x is an input, so ln_1 needs only its parameters' gradient.
    LinearBackward(dh_, merged_, kAttnProjWeight, kAttnProjBias, &dmerged_);
    Parallel(s_.batch * s_.heads, 1, [&](int part, Index begin, Index end) {
      for (Index bh = begin; bh < end; ++bh) AttentionBackward(bh / s_.heads, bh % s_.heads, part);
    });
    LinearBackward(dqkv_, ln1_, kQkvWeight, kQkvBias, &dh_);  // dh_ reused: ln_1's output gradient
    LayerNormBackward(dh_, xhat1_, rstd1_, kLn1Weight, nullptr);
  }

  // The heads of one sequence read q, k, v in place from qkv's columns [which * d + head * hd, +hd).
  ConstStrided QkvBlock(const Mat& m, Index b, Index head, Index which) const {
    const Index d = s_.width, hd = d / s_.heads;
    return ConstStrided(m.data() + b * s_.seq * 3 * d + which * d + head * hd, s_.seq, hd, Eigen::OuterStride<>(3 * d));
  }
  Strided MutableQkvBlock(Mat& m, Index b, Index head, Index which) {
    const Index d = s_.width, hd = d / s_.heads;
    return Strided(m.data() + b * s_.seq * 3 * d + which * d + head * hd, s_.seq, hd, Eigen::OuterStride<>(3 * d));
  }
  Strided MergedBlock(Mat& m, Index b, Index head) {
    const Index d = s_.width, hd = d / s_.heads;
    return Strided(m.data() + b * s_.seq * d + head * hd, s_.seq, hd, Eigen::OuterStride<>(d));
  }
  auto Probs(Index b, Index head) { return probs_.middleRows((b * s_.heads + head) * s_.seq, s_.seq); }
  float Scale() const { return 1.0f / std::sqrt(static_cast<float>(s_.width / s_.heads)); }

  // softmax(q k^T / sqrt(hd)) over the keys j <= i, times v.
  void AttentionForward(Index b, Index head) {
    const Index s = s_.seq;
    auto p = Probs(b, head);
    p.noalias() = QkvBlock(qkv_, b, head, 0) * QkvBlock(qkv_, b, head, 1).transpose();
    const float scale = Scale();
    for (Index i = 0; i < s; ++i) {
      auto seen = p.row(i).head(i + 1).array();
      const float max = seen.maxCoeff();
      seen = ((seen - max) * scale).exp();
      seen /= seen.sum();
      p.row(i).tail(s - i - 1).setZero();
    }
    MergedBlock(merged_, b, head).noalias() = p * QkvBlock(qkv_, b, head, 2);
  }

  void AttentionBackward(Index b, Index head, int part) {
    const Index s = s_.seq;
    const auto p = Probs(b, head);
    const Strided dy = MergedBlock(dmerged_, b, head);
    auto dp = dprobs_.middleRows(part * s, s);
    dp.noalias() = dy * QkvBlock(qkv_, b, head, 2).transpose();
    MutableQkvBlock(dqkv_, b, head, 2).noalias() = p.transpose() * dy;
    // Softmax backward, scaled as the scores were: ds = p (dp - sum_j p dp) / sqrt(hd).
    const float scale = Scale();
    for (Index i = 0; i < s; ++i) {
      auto seen = dp.row(i).head(i + 1).array();
      const auto pi = p.row(i).head(i + 1).array();
      seen = pi * (seen - (pi * seen).sum()) * scale;
      dp.row(i).tail(s - i - 1).setZero();
    }
    MutableQkvBlock(dqkv_, b, head, 0).noalias() = dp * QkvBlock(qkv_, b, head, 1);
    MutableQkvBlock(dqkv_, b, head, 1).noalias() = dp.transpose() * QkvBlock(qkv_, b, head, 0);
  }

  // y = (x - mean) / sqrt(var + eps) * weight + bias per row; keeps xhat and 1 / sqrt(var + eps).
  void LayerNorm(const Mat& x, Index weight, Mat& xhat, Eigen::VectorXf& rstd, Mat& y) {
    const float n = static_cast<float>(x.cols());
    Rows([&](int, Index begin, Index end) {
      for (Index r = begin; r < end; ++r) {
        const float mean = x.row(r).sum() / n;
        xhat.row(r).array() = x.row(r).array() - mean;
        rstd[r] = 1.0f / std::sqrt(xhat.row(r).squaredNorm() / n + kNormEps);
        xhat.row(r) *= rstd[r];
        y.row(r).array() = xhat.row(r).array() * V(weight).array() + V(weight + 1).array();
      }
    });
  }

  // From dy, the gradient of a layer norm's output: its weight's and bias's gradients and, if
  // dx is given, dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)) with dxhat = dy weight
  // (dx may be dy itself).
  void LayerNormBackward(const Mat& dy, const Mat& xhat, const Eigen::VectorXf& rstd, Index weight, Mat* dx) {
    const Index d = dy.cols();
    const float n = static_cast<float>(d);
    const int parts = Rows([&](int part, Index begin, Index end) {
      // Row by row: a row-major matrix's column sums vectorise along the row.
      auto sums = partials_.row(part).head(2 * d);
      sums.setZero();
      for (Index r = begin; r < end; ++r) {
        sums.head(d).array() += dy.row(r).array() * xhat.row(r).array();
        sums.tail(d) += dy.row(r);
        if (dx == nullptr) continue;
        const auto g = dy.row(r).array() * V(weight).array();
        const float mean_g = g.sum() / n, mean_gx = (g * xhat.row(r).array()).sum() / n;
        dx->row(r).array() = rstd[r] * (g - mean_g - xhat.row(r).array() * mean_gx);
      }
    });
    params_[weight].grad.row(0) = partials_.topLeftCorner(parts, d).colwise().sum();
    params_[weight + 1].grad.row(0) = partials_.block(0, d, parts, d).colwise().sum();
  }

  // For y = x W^T + b: dW = dy^T x, db = the column sums of dy, dx = dy W.
  void LinearBackward(const Mat& dy, const Mat& x, Index weight, Index bias, Mat* dx) {
    Gemm(dy, true, x, false, params_[weight].grad);
    const Index n = dy.cols();
    const int parts = Rows([&](int part, Index begin, Index end) {
      auto sums = partials_.row(part).head(n);
      sums.setZero();
      for (Index r = begin; r < end; ++r) sums += dy.row(r);
    });
    params_[bias].grad.row(0) = partials_.topLeftCorner(parts, n).colwise().sum();
    Gemm(dy, false, W(weight), false, *dx);
  }

  // PyTorch's AdamW: p = p (1 - lr wd) - lr / c1 m / (sqrt(v / c2) + eps).
  void Update(Param& p) {
    const float c1 = 1 - std::pow(adamw_.beta1, static_cast<float>(steps_));
    const float c2 = 1 - std::pow(adamw_.beta2, static_cast<float>(steps_));
    const float keep = 1 - adamw_.lr * (p.decays ? adamw_.weight_decay : 0), step = adamw_.lr / c1;
    const float b1 = adamw_.beta1, b2 = adamw_.beta2, eps = adamw_.eps;
    Parallel(p.value.size(), kElementsPerPart, [&](int, Index begin, Index end) {
      const Index n = end - begin;
      Flat value(p.value.data() + begin, n), m(p.exp_avg.data() + begin, n), v(p.exp_avg_sq.data() + begin, n);
      const ConstFlat g(p.grad.data() + begin, n);
      m = b1 * m + (1 - b1) * g;
      v = b2 * v + (1 - b2) * g.square();
      value = value * keep - step * m / ((v / c2).sqrt() + eps);
    });
  }

  // out = op(a) op(b), op a transpose where asked (bench/eigen_gemm.h).
  void Gemm(const Mat& a, bool ta, const Mat& b, bool tb, Mat& out) {
    if (threads_ == 1) {
      ProductInto(a, ta, b, tb, out);
    } else {
      ContractInto(a, ta, b, tb, out, device_);
    }
  }

  // body(part, begin, end) over [0, n) in up to `threads` parts of at least min_per_part,
  // the first on the calling thread; returns how many parts ran.
  template <class F>
  int Parallel(Index n, Index min_per_part, F body) {
    const int parts = static_cast<int>(std::clamp<Index>(n / min_per_part, 1, threads_));
    if (parts == 1) {
      body(0, 0, n);
      return 1;
    }
    Eigen::Barrier done(parts - 1);
    for (int part = 1; part < parts; ++part) {
      pool_.Schedule([&, part] {
        body(part, n * part / parts, n * (part + 1) / parts);
        done.Notify();
      });
    }
    body(0, 0, n / parts);
    done.Wait();
    return parts;
  }
  template <class F>
  int Rows(F body) {
    return Parallel(rows_, kRowsPerPart, body);
  }

  GptBlockShape s_;
  GptBlockAdamW adamw_;
  Index rows_;
  Eigen::ThreadPool pool_;
  Eigen::ThreadPoolDevice device_;
  int threads_;
  int64_t steps_ = 0;
  std::array<Param, kParams> params_;
  Mat x_, target_;
  // Forward activations (each kept for the backward) and gradients, [rows, width or more].
  Mat xhat1_, ln1_, qkv_, merged_, h_, xhat2_, ln2_, fc_, gelu_, out_;
  Mat dout_, dgelu_, dh_, dmerged_, dqkv_;
  Eigen::VectorXf rstd1_, rstd2_;
  Mat probs_;     // [batch * heads * seq, seq]: each head's attention weights
  Mat dprobs_;    // [threads * seq, seq]: a scratch per part
  Mat partials_;  // [threads, 2 * 4 width]: per-part column sums
  Mat tanh_;      // [threads, 4 width]: the GELU backward's tanh of one row
};

}  // namespace kiln::bench

#endif  // KILN_BENCH_EIGEN_GPT_BLOCK_STEP_H_
