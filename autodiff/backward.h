// The backward pass: walks the graph from the loss in reverse creation order, so each node
// runs once, after every consumer of its output has passed its gradient on. A leaf is done the
// moment its last consumer has run: its gradient is final then, and its hooks fire while the
// rest of backward continues. Each node's saved tensors and edges are released as soon as it
// has run, so the graph is gone when backward returns.
#ifndef KILN_AUTODIFF_BACKWARD_H_
#define KILN_AUTODIFF_BACKWARD_H_

#include <optional>
#include <queue>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "autodiff/gradients.h"
#include "autodiff/node.h"

namespace kiln::autodiff {

// For every node reachable from `root`, how many consumers will send it a gradient.
template <class P>
absl::flat_hash_map<Node<P>*, int> CountConsumers(Node<P>* root) {
  absl::flat_hash_map<Node<P>*, int> pending;
  std::vector<Node<P>*> stack = {root};
  pending[root] = 0;
  while (!stack.empty()) {
    Node<P>* n = stack.back();
    stack.pop_back();
    for (const auto& in : n->inputs) {
      if (in == nullptr) continue;
      auto [it, first] = pending.try_emplace(in.get(), 0);
      ++it->second;
      if (first) stack.push_back(in.get());
    }
  }
  return pending;
}

// One backward pass: the nodes ready to run, the gradients on their way to each node, and
// the leaves' final gradients.
template <Backend B>
class BackwardPass {
  using P = typename B::Primitive;
  using N = Node<P>;

 public:
  BackwardPass(const std::shared_ptr<N>& root, P seed) : pending_(CountConsumers(root.get())) {
    incoming_.emplace(root.get(), std::move(seed));
    ready_.push(root);
  }

  Gradients<B> Run(const std::shared_ptr<N>& root) {
    if (root->leaf) {
      FinishLeaf(root.get());
      return std::move(result_);
    }
    while (!ready_.empty()) {
      const std::shared_ptr<N> n = ready_.top();
      ready_.pop();
      typename N::Grads grads = Differentiate(*n);
      // Free what this node saved for backward, and its edges.
      n->backward = nullptr;
      n->consumed = true;
      auto inputs = std::move(n->inputs);
      n->inputs.clear();
      PassOn(inputs, grads);
    }
    return std::move(result_);
  }

 private:
  struct Later {
    bool operator()(const std::shared_ptr<N>& a, const std::shared_ptr<N>& b) const { return a->id < b->id; }
  };

  // The gradients of n's inputs from the gradient its consumers sent; none when they sent none.
  typename N::Grads Differentiate(N& n) {
    std::optional<P> grad;  // empty when no consumer sent this node a gradient
    if (auto it = incoming_.find(&n); it != incoming_.end()) {
      grad = std::move(it->second);
      incoming_.erase(it);
    }
    typename N::Grads grads;
    if (grad.has_value()) {
      uint32_t needs = 0;
      for (size_t i = 0; i < n.inputs.size() && i < 32; ++i) {
        if (n.inputs[i] != nullptr) needs |= 1u << i;
      }
      grads = n.backward(*grad, needs);
      grad.reset();
    }
    return grads;
  }

  // Adds each input's gradient to what it has received; an input whose last consumer this was
  // is ready to run, or finished if it is a leaf.
  void PassOn(const decltype(N::inputs)& inputs, typename N::Grads& grads) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] == nullptr) continue;
      N* in = inputs[i].get();
      if (i < grads.size() && grads[i].has_value()) {
        auto [it, first] = incoming_.try_emplace(in, std::move(*grads[i]));
        if (!first) it->second = B::binary(BinaryOp::kAdd, it->second, *grads[i]);
      }
      if (--pending_[in] > 0) continue;
      if (in->leaf)
        FinishLeaf(in);
      else
        ready_.push(inputs[i]);
    }
  }

  // A leaf has nothing to run: it is finished the moment its last consumer has run, which is
  // when its gradient is final and its hooks fire (not when the heap would reach its old id).
  // Leaf gradients are handed out dense (a reshape to their own shape materialises a view):
  // a parameter used through a transposed view would otherwise get a transposed gradient,
  // and every optimizer and all-reduce pass over it would stride through memory.
  void FinishLeaf(N* leaf) {
    auto it = incoming_.find(leaf);
    if (it == incoming_.end()) return;  // the loss does not depend on it after all
    const P grad = B::reshape(it->second, B::shape(it->second));
    incoming_.erase(it);
    for (const auto& hook : leaf->hooks) hook(grad);
    if (!leaf->hooks_take_gradient) result_.Set(leaf->id, grad);
  }

  absl::flat_hash_map<N*, int> pending_;
  std::priority_queue<std::shared_ptr<N>, std::vector<std::shared_ptr<N>>, Later> ready_;
  absl::flat_hash_map<N*, P> incoming_;
  Gradients<B> result_;
};

template <Backend B>
Gradients<B> RunBackward(const std::shared_ptr<Node<typename B::Primitive>>& root, typename B::Primitive seed) {
  if (root->consumed) {
    ThrowInvalidArgument(
        "backward: this graph was already used by a backward pass (kiln frees a graph as it "
        "goes); run the forward pass again");
  }
  BackwardPass<B> pass(root, std::move(seed));
  return pass.Run(root);
}

}  // namespace kiln::autodiff

#endif  // KILN_AUTODIFF_BACKWARD_H_
