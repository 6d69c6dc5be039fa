// The GEMM of the hand-written Eigen steps (eigen_mlp_step.h, eigen_gpt_block_step.h):
// out = op(a) op(b), op a transpose where asked, row-major float matrices of out's size.
// Without a device: Eigen's matrix products (which Eigen spreads over OpenMP's threads when the
// file is compiled with OpenMP); with one: Eigen's tensor contraction on that thread pool.
#ifndef KILN_BENCH_EIGEN_GEMM_H_
#define KILN_BENCH_EIGEN_GEMM_H_

#include "Eigen/Core"
#ifndef _OPENMP
#ifndef EIGEN_USE_THREADS
#define EIGEN_USE_THREADS
#endif
#include "unsupported/Eigen/CXX11/Tensor"
#endif

namespace kiln::bench {

template <class Mat>
void ProductInto(const Mat& a, bool ta, const Mat& b, bool tb, Mat& out) {
  if (ta) {
    out.noalias() = a.transpose() * b;
  } else if (tb) {
    out.noalias() = a * b.transpose();
  } else {
    out.noalias() = a * b;
  }
}

#ifndef _OPENMP
template <class Mat>
void ContractInto(const Mat& a, bool ta, const Mat& b, bool tb, Mat& out, const Eigen::ThreadPoolDevice& device) {
  using In = Eigen::TensorMap<Eigen::Tensor<const float, 2, Eigen::RowMajor>>;
  using Out = Eigen::TensorMap<Eigen::Tensor<float, 2, Eigen::RowMajor>>;
  const In ta_map(a.data(), a.rows(), a.cols()), tb_map(b.data(), b.rows(), b.cols());
  Out o(out.data(), out.rows(), out.cols());
  const Eigen::array<Eigen::IndexPair<int>, 1> dims = {Eigen::IndexPair<int>(ta ? 0 : 1, tb ? 1 : 0)};
  o.device(device) = ta_map.contract(tb_map, dims);
}
#endif

}  // namespace kiln::bench

#endif  // KILN_BENCH_EIGEN_GEMM_H_
