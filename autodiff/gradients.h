// Gradients: what backward() returns. Holds the gradient of every leaf the loss depends on,
// as tensors of the wrapped backend; look one up by the tensor it belongs to.
#ifndef KILN_AUTODIFF_GRADIENTS_H_
#define KILN_AUTODIFF_GRADIENTS_H_

#include <cstdint>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "tensor/tensor.h"

namespace kiln {

template <Backend B>
struct Autodiff;

template <Backend B>
class Gradients {
 public:
  // The gradient of `leaf` (a tensor made with require_grad()), or nothing if the loss does
  // not depend on it.
  std::optional<Tensor<B>> get(const Tensor<Autodiff<B>>& leaf) const {
    const auto& node = leaf.primitive().node;
    if (node == nullptr) return std::nullopt;
    const auto it = grads_.find(node->id);
    if (it == grads_.end()) return std::nullopt;
    return Tensor<B>(it->second);
  }
  bool contains(const Tensor<Autodiff<B>>& leaf) const { return get(leaf).has_value(); }
  int64_t size() const { return static_cast<int64_t>(grads_.size()); }

  // Adds `other`'s gradients into these (gradient accumulation over micro-batches).
  void accumulate(const Gradients& other) {
    for (const auto& [id, g] : other.grads_) Add(id, g);
  }

  // Sets the gradient of `leaf` by hand: an optimizer can then step with given gradients,
  // without a backward pass. The gradient must have the leaf's shape, dtype and device.
  void set(const Tensor<Autodiff<B>>& leaf, const Tensor<B>& grad) {
    const auto& node = leaf.primitive().node;
    if (node == nullptr || !node->leaf) {
      ThrowInvalidArgument("Gradients::set: %s is no leaf that requires a gradient", leaf.Describe());
    }
    if (grad.shape() != leaf.shape() || grad.dtype() != leaf.dtype() || grad.device() != leaf.device()) {
      ThrowInvalidArgument("Gradients::set: gradient %s does not match its leaf %s", grad.Describe(), leaf.Describe());
    }
    Set(node->id, grad.primitive());
  }

  // For the backward engine.
  void Add(uint64_t id, const typename B::Primitive& g) {
    auto [it, inserted] = grads_.try_emplace(id, g);
    if (!inserted) it->second = B::binary(BinaryOp::kAdd, it->second, g);
  }
  void Set(uint64_t id, typename B::Primitive g) { grads_.insert_or_assign(id, std::move(g)); }
  const typename B::Primitive* Find(uint64_t id) const {
    const auto it = grads_.find(id);
    return it == grads_.end() ? nullptr : &it->second;
  }

 private:
  absl::flat_hash_map<uint64_t, typename B::Primitive> grads_;
};

}  // namespace kiln

#endif  // KILN_AUTODIFF_GRADIENTS_H_
