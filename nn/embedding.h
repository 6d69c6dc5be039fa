// Embedding: a table of `vocab` vectors of `dim`, looked up by integer id (token or position);
// weight [vocab, dim] as PyTorch stores it. Its forward takes ids, not activations.
#ifndef KILN_NN_EMBEDDING_H_
#define KILN_NN_EMBEDDING_H_

#include "nn/functional.h"
#include "nn/module.h"

namespace kiln::nn {

struct EmbeddingOptions {
  double init_std = 1.0;  // weights ~ N(0, init_std^2) (PyTorch's default; GPT-2 uses 0.02)
  DType dtype = DType::kF32;
};

template <Backend B>
class Embedding : public Module<B> {
 public:
  Embedding(int64_t vocab, int64_t dim, Generator& gen, EmbeddingOptions options = {},
            const typename B::Device& device = {}) {
    if (vocab < 1 || dim < 1) ThrowInvalidArgument("Embedding(%d, %d): sizes must be positive", vocab, dim);
    weight_ =
        this->add_parameter("weight", Tensor<B>::normal({vocab, dim}, 0, options.init_std, gen, options.dtype, device));
  }
  // ids: integers of any shape in [0, vocab); the result is ids.shape + [dim].
  Tensor<B> forward(const Tensor<B>& ids) override { return functional::embedding(ids, weight()); }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Embedding>(); }

  const Tensor<B>& weight() const { return this->param(weight_); }

 private:
  size_t weight_ = 0;
};

}  // namespace kiln::nn

#endif  // KILN_NN_EMBEDDING_H_
