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

template <Backend B>
Gradients<B> RunBackward(const std::shared_ptr<Node<typename B::Primitive>>& root, typename B::Primitive seed) {
  using P = typename B::Primitive;
  using N = Node<P>;
  if (root->consumed) {
    ThrowInvalidArgument(
        "backward: this graph was already used by a backward pass (kiln frees a graph as it "
        "goes); run the forward pass again");
  }
  // Count, for every node reachable from the root, how many consumers will send it a gradient.
  absl::flat_hash_map<N*, int> pending;
  std::vector<N*> stack = {root.get()};
  pending[root.get()] = 0;
  while (!stack.empty()) {
    N* n = stack.back();
    stack.pop_back();
    for (const auto& in : n->inputs) {
      if (in == nullptr) continue;
      auto [it, first] = pending.try_emplace(in.get(), 0);
      ++it->second;
      if (first) stack.push_back(in.get());
    }
  }

  struct Later {
    bool operator()(const std::shared_ptr<N>& a, const std::shared_ptr<N>& b) const { return a->id < b->id; }
  };
  std::priority_queue<std::shared_ptr<N>, std::vector<std::shared_ptr<N>>, Later> ready;
  absl::flat_hash_map<N*, P> incoming;
  incoming.emplace(root.get(), std::move(seed));
  ready.push(root);

  Gradients<B> result;
  // A leaf has nothing to run: it is finished the moment its last consumer has run, which is
  // when its gradient is final and its hooks fire (not when the heap would reach its old id).
  // Leaf gradients are handed out dense (a reshape to their own shape materialises a view):
  // a parameter used through a transposed view would otherwise get a transposed gradient,
  // and every optimizer and all-reduce pass over it would stride through memory.
  auto finish_leaf = [&](N* leaf) {
    auto it = incoming.find(leaf);
    if (it == incoming.end()) return;  // the loss does not depend on it after all
    const P grad = B::reshape(it->second, B::shape(it->second));
    incoming.erase(it);
    for (const auto& hook : leaf->hooks) hook(grad);
    result.Set(leaf->id, grad);
  };
  if (root->leaf) {
    finish_leaf(root.get());
    return result;
  }
  while (!ready.empty()) {
    const std::shared_ptr<N> n = ready.top();
    ready.pop();
    std::optional<P> grad;  // empty when no consumer sent this node a gradient
    if (auto it = incoming.find(n.get()); it != incoming.end()) {
      grad = std::move(it->second);
      incoming.erase(it);
    }
    typename N::Grads grads;
    if (grad.has_value()) {
      uint32_t needs = 0;
      for (size_t i = 0; i < n->inputs.size() && i < 32; ++i) {
        if (n->inputs[i] != nullptr) needs |= 1u << i;
      }
      grads = n->backward(*grad, needs);
      grad.reset();
    }
    // Free what this node saved for backward, and its edges.
    n->backward = nullptr;
    n->consumed = true;
    auto inputs = std::move(n->inputs);
    n->inputs.clear();
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i] == nullptr) continue;
      N* in = inputs[i].get();
      if (i < grads.size() && grads[i].has_value()) {
        auto [it, first] = incoming.try_emplace(in, std::move(*grads[i]));
        if (!first) it->second = B::binary(BinaryOp::kAdd, it->second, *grads[i]);
      }
      if (--pending[in] > 0) continue;
      if (in->leaf)
        finish_leaf(in);
      else
        ready.push(inputs[i]);
    }
  }
  return result;
}

}  // namespace kiln::autodiff

#endif  // KILN_AUTODIFF_BACKWARD_H_
