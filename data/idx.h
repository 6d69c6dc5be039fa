// Reading IDX files (the MNIST family's format), gzip-compressed or not, and the
// Fashion-MNIST splits that Debian's dataset-fashion-mnist installs.
#ifndef KILN_DATA_IDX_H_
#define KILN_DATA_IDX_H_

#include <string>

#include "absl/status/statusor.h"
#include "tensor/tensor_data.h"

namespace kiln::data {

// An IDX file of unsigned bytes as i32 values with the file's dims. NotFound for a missing
// file; FailedPrecondition for a directory, FIFO or device (refused without reading it);
// DataLoss naming the problem for a truncated or malformed one. Memory is bounded by what the
// file holds, not by what its header claims.
absl::StatusOr<TensorData> ReadIdx(const std::string& path);

inline constexpr char kFashionMnistDir[] = "/usr/share/datasets/fashion-mnist";

struct LabeledImages {
  TensorData images;  // f32 [N, 28, 28], standardised with the training set's mean and std
  TensorData labels;  // i64 [N], class ids 0..9
};

// split: "train" (60,000 images) or "t10k" (10,000).
absl::StatusOr<LabeledImages> LoadFashionMnist(const std::string& dir, const std::string& split);

}  // namespace kiln::data

#endif  // KILN_DATA_IDX_H_
