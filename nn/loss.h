// Losses, averaged over the batch; half inputs are widened, so a loss is never a half tensor.
#ifndef KILN_NN_LOSS_H_
#define KILN_NN_LOSS_H_

#include "nn/precision.h"
#include "tensor/tensor.h"

namespace kiln::nn {

// Cross-entropy from logits [N, K] and integer class ids [N] in [0, K).
template <Backend B>
Tensor<B> CrossEntropy(const Tensor<B>& logits, const Tensor<B>& labels) {
  if (logits.rank() != 2 || labels.rank() != 1 || labels.size(0) != logits.size(0)) {
    ThrowInvalidArgument("CrossEntropy: needs logits [N, K] and labels [N], got %s and %s", logits.Describe(),
                         labels.Describe());
  }
  return -ForLoss(logits).log_softmax(1).gather(1, labels.unsqueeze(1)).mean();
}

// Mean squared error between two tensors of one shape.
template <Backend B>
Tensor<B> MeanSquaredError(const Tensor<B>& prediction, const Tensor<B>& target) {
  if (prediction.shape() != target.shape()) {
    ThrowInvalidArgument("MeanSquaredError: shapes differ: %s and %s", prediction.Describe(), target.Describe());
  }
  const Tensor<B> diff = ForLoss(prediction) - ForLoss(target);
  return (diff * diff).mean();
}

}  // namespace kiln::nn

#endif  // KILN_NN_LOSS_H_
