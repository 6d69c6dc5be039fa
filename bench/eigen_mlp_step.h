// The MLP training step of step_bench written directly in Eigen, no framework: the limit
// kiln's step is measured against. Forward (GEMM, bias, ReLU), softmax cross-entropy or mean
// squared error, the backward GEMMs, and SGD with momentum, in place on preallocated
// matrices. On one thread the GEMMs are Eigen's matrix products; on more, Eigen's tensor
// contraction on a ThreadPoolDevice, or, compiled with OpenMP (bench/eigen_step_openmp.cc,
// in a namespace of its own so that kiln's Eigen code in the same binary stays as it is),
// the same matrix products parallelised by Eigen through OpenMP.
#ifndef KILN_BENCH_EIGEN_MLP_STEP_H_
#define KILN_BENCH_EIGEN_MLP_STEP_H_

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "Eigen/Core"
#include "bench/eigen_gemm.h"

namespace kiln::bench {

class EigenMlpStep {
 public:
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using Row = Eigen::RowVectorXf;

  EigenMlpStep(const std::vector<int64_t>& sizes, int64_t batch, bool classify, int threads)
#ifdef _OPENMP
      : classify_(classify), threads_(threads) {
    Eigen::setNbThreads(threads);
#else
      : classify_(classify), pool_(threads), device_(&pool_, threads), threads_(threads) {
#endif
    std::mt19937 gen(1);
    const auto uniform = [&](Mat& m, float bound) {
      std::uniform_real_distribution<float> u(-bound, bound);
      for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = u(gen);
    };
    for (size_t i = 0; i + 1 < sizes.size(); ++i) {
      Mat w(sizes[i], sizes[i + 1]);  // [in, out]: y = x w + b
      uniform(w, std::sqrt(6.0f / sizes[i]));
      w_.push_back(w);
      b_.push_back(Row::Zero(sizes[i + 1]));
      vw_.push_back(Mat::Zero(sizes[i], sizes[i + 1]));
      vb_.push_back(Row::Zero(sizes[i + 1]));
      gw_.push_back(Mat(sizes[i], sizes[i + 1]));
      gb_.push_back(Row(sizes[i + 1]));
    }
    acts_.resize(sizes.size());
    acts_[0] = Mat(batch, sizes.front());
    uniform(acts_[0], 1);
    target_ = Mat(batch, sizes.back());
    uniform(target_, 1);
    std::uniform_int_distribution<int64_t> label(0, sizes.back() - 1);
    for (int64_t i = 0; i < batch; ++i) labels_.push_back(label(gen));
  }

  // One step; returns the loss.
  float Step() {
    const size_t layers = w_.size();
    const float n = static_cast<float>(acts_[0].rows());
    for (size_t i = 0; i < layers; ++i) {
      Gemm(acts_[i], false, w_[i], false, acts_[i + 1]);
      acts_[i + 1].rowwise() += b_[i];
      if (i + 1 < layers) acts_[i + 1] = acts_[i + 1].cwiseMax(0.0f);
    }
    Mat& y = acts_.back();
    float loss = 0;
    if (classify_) {  // softmax cross-entropy, mean over the batch
      grad_ = y;
      for (int64_t r = 0; r < grad_.rows(); ++r) {
        auto row = grad_.row(r).array();
        const float m = row.maxCoeff();
        row = (row - m).exp();
        const float s = row.sum();
        loss += std::log(s) + m - y(r, labels_[r]);
        row /= s * n;
        grad_(r, labels_[r]) -= 1.0f / n;
      }
      loss /= n;
    } else {  // mean squared error over every element
      grad_ = y - target_;
      loss = grad_.squaredNorm() / static_cast<float>(y.size());
      grad_ *= 2.0f / static_cast<float>(y.size());
    }
    for (size_t i = layers; i-- > 0;) {
      Gemm(acts_[i], true, grad_, false, gw_[i]);
      gb_[i] = grad_.colwise().sum();
      if (i > 0) {
        Gemm(grad_, false, w_[i], true, back_);
        grad_ = (acts_[i].array() > 0).select(back_, 0.0f);
      }
    }
    for (size_t i = 0; i < layers; ++i) {  // PyTorch's SGD: v = momentum v + g; p -= lr v
      vw_[i] = kMomentum * vw_[i] + gw_[i];
      w_[i] -= kLr * vw_[i];
      vb_[i] = kMomentum * vb_[i] + gb_[i];
      b_[i] -= kLr * vb_[i];
    }
    return loss;
  }

 private:
  // out = op(a) op(b), op a transpose where asked (bench/eigen_gemm.h).
  void Gemm(const Mat& a, bool ta, const Mat& b, bool tb, Mat& out) {
    out.resize(ta ? a.cols() : a.rows(), tb ? b.rows() : b.cols());
#ifdef _OPENMP
    ProductInto(a, ta, b, tb, out);  // Eigen splits them over setNbThreads threads
#else
    if (threads_ == 1) {
      ProductInto(a, ta, b, tb, out);
    } else {
      ContractInto(a, ta, b, tb, out, device_);
    }
#endif
  }

  static constexpr float kLr = 0.01f, kMomentum = 0.9f;
  bool classify_;
#ifndef _OPENMP
  Eigen::ThreadPool pool_;
  Eigen::ThreadPoolDevice device_;
#endif
  int threads_;
  std::vector<Mat> w_, vw_, gw_, acts_;
  std::vector<Row> b_, vb_, gb_;
  Mat target_, grad_, back_;
  std::vector<int64_t> labels_;
};

}  // namespace kiln::bench

#endif  // KILN_BENCH_EIGEN_MLP_STEP_H_
