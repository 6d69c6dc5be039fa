// Sequential: children applied in order; parameters are named by position ("0.weight").
// set_recompute(k): activation checkpointing (nn/recompute.h) over runs of k children at a
// time, keeping only each run's input for backward; names and gradients are unchanged.
#ifndef KILN_NN_SEQUENTIAL_H_
#define KILN_NN_SEQUENTIAL_H_

#include <algorithm>
#include <string>
#include <vector>

#include "nn/module.h"
#include "nn/recompute.h"

namespace kiln::nn {

template <Backend B>
class Sequential : public Module<B> {
 public:
  Sequential() = default;

  // Appends a layer built in place: seq.add<Linear<B>>(784, 256, gen).
  template <class Layer, class... Args>
  Sequential& add(Args&&... args) {
    return add(std::make_unique<Layer>(std::forward<Args>(args)...));
  }
  // Each layer is a shard unit (Module::set_shard_unit): Sequential uses it only in its forward.
  Sequential& add(std::unique_ptr<Module<B>> layer) {
    layer->set_shard_unit(true);
    this->add_child(std::to_string(this->child_count()), std::move(layer));
    return *this;
  }

  Tensor<B> forward(const Tensor<B>& x) override {
    if (segment_ == 0) return Run(0, this->child_count(), x);
    Tensor<B> y = x;
    for (size_t begin = 0; begin < this->child_count(); begin += segment_) {
      const size_t end = std::min(begin + segment_, this->child_count());
      std::vector<Module<B>*> layers;
      for (size_t i = begin; i < end; ++i) layers.push_back(&this->child(i));
      y = RecomputeForward<B>(layers, y, [this, begin, end](const Tensor<B>& in) { return Run(begin, end, in); });
    }
    return y;
  }
  // Recomputes runs of `layers_per_segment` children in backward (0: off, stores everything).
  void set_recompute(size_t layers_per_segment) { segment_ = layers_per_segment; }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Sequential>(); }

 private:
  Tensor<B> Run(size_t begin, size_t end, const Tensor<B>& x) {
    Tensor<B> y = x;
    for (size_t i = begin; i < end; ++i) y = this->child(i)(y);
    return y;
  }

  size_t segment_ = 0;
};

}  // namespace kiln::nn

#endif  // KILN_NN_SEQUENTIAL_H_
