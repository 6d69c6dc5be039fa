// A node of the autodiff graph: one recorded op (its backward step and its inputs' nodes) or a
// leaf (a tensor that asked for gradients, with its hooks).
#ifndef KILN_AUTODIFF_NODE_H_
#define KILN_AUTODIFF_NODE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>

#include "absl/container/inlined_vector.h"

namespace kiln::autodiff {

// Nodes alive in this process (for tests and leak checks).
std::atomic<int64_t>& LiveNodes();
// Creation order; a node's inputs always have smaller ids than the node.
uint64_t NextNodeId();

template <class P>  // P: the wrapped backend's tensor primitive
struct Node {
  using Grads = absl::InlinedVector<std::optional<P>, 3>;
  // Gradients for each input, given the gradient of this node's output. `needs` bit i is set
  // when input i wants one (inputs past the 32nd always count as wanting one).
  using Backward = std::function<Grads(const P& grad, uint32_t needs)>;
  using Hook = std::function<void(const P& grad)>;

  Node() : id(NextNodeId()) { LiveNodes().fetch_add(1, std::memory_order_relaxed); }
  ~Node() { LiveNodes().fetch_sub(1, std::memory_order_relaxed); }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  const uint64_t id;
  bool leaf = false;
  bool consumed = false;  // a backward pass has run through it and freed it
  // A layout hint: this node's output is its input with the last two dims swapped (a
  // transposed view, as Linear makes of its weight). matmul's backward then computes that
  // input's gradient in the input's own layout, so no transposing copy is needed.
  bool swaps_last_two = false;
  absl::InlinedVector<std::shared_ptr<Node>, 3> inputs;  // null where no gradient flows
  Backward backward;
  std::vector<Hook> hooks;  // leaves only: called once the gradient is final
  // Leaves only: a hook took the gradient, so backward's result leaves it out (a sharded
  // gradient sync keeps only its chunk of it, and holding the whole would undo that).
  bool hooks_take_gradient = false;
};

}  // namespace kiln::autodiff

#endif  // KILN_AUTODIFF_NODE_H_
