// Sequential: children applied in order; parameters are named by position ("0.weight").
#ifndef KILN_NN_SEQUENTIAL_H_
#define KILN_NN_SEQUENTIAL_H_

#include <string>

#include "nn/module.h"

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
  Sequential& add(std::unique_ptr<Module<B>> layer) {
    this->add_child(std::to_string(this->child_count()), std::move(layer));
    return *this;
  }

  Tensor<B> forward(const Tensor<B>& x) override {
    Tensor<B> y = x;
    for (size_t i = 0; i < this->child_count(); ++i) y = this->child(i).forward(y);
    return y;
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Sequential>(); }
};

}  // namespace kiln::nn

#endif  // KILN_NN_SEQUENTIAL_H_
