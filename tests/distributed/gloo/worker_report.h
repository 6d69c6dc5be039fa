// The worker's reporting and inputs: "OK"/"FAIL" lines for checks, "STATUS" lines for a
// collective's error, exact inputs per global member, and what a scenario runs on.
#ifndef KILN_TESTS_DISTRIBUTED_GLOO_WORKER_REPORT_H_
#define KILN_TESTS_DISTRIBUTED_GLOO_WORKER_REPORT_H_

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "distributed/gloo/gloo_process_group.h"
#include "tensor/tensor.h"

namespace kiln::distributed::worker {

inline int failures = 0;

inline void Check(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "OK" : "FAIL", what.c_str());
  std::fflush(stdout);
  if (!ok) ++failures;
}

inline int Status(const absl::Status& s) {
  std::printf("STATUS %s: %s\n", absl::StatusCodeToString(s.code()).c_str(), std::string(s.message()).c_str());
  std::fflush(stdout);
  return 3;
}

template <Backend B>
std::vector<double> V(const Tensor<B>& t) {
  return t.to_data().ToDoubles();
}

// Global member g's input: small multiples of 1/4, so sums are exact in any order.
template <Backend B>
Tensor<B> Input(int g, Shape shape, DType dtype, const typename B::Device& d) {
  std::vector<double> v(shape.numel());
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = (g + 1) * (IsFloating(dtype) ? 0.25 : 1) + static_cast<double>(i % 7) - 3 * g;
  return Tensor<B>::from_vector(v, shape, d).to(dtype);
}

template <Backend B>
struct Setup {
  std::shared_ptr<GlooProcessGroup> world;
  std::vector<typename B::Device> devices;
  int local = 1;
};

}  // namespace kiln::distributed::worker

#endif  // KILN_TESTS_DISTRIBUTED_GLOO_WORKER_REPORT_H_
