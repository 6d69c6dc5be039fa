// Activation checkpointing: a part of the model runs its forward without recording, so none of
// its intermediate tensors are kept for backward; backward recomputes that forward, recording,
// and differentiates through the copy. Memory for activations falls to one tensor per part
// (its input) at the cost of a second forward.
//
//   auto block = std::make_unique<nn::Recompute<AD>>(std::make_unique<nn::Linear<AD>>(...));
//
// How: the forward records ONE node whose inputs are the part's input and its parameters. Its
// backward makes fresh leaves holding the same values, puts the parameter leaves in place of
// the module's parameters (restored after), runs the forward again with recording on, and runs
// a nested backward from that output with the incoming gradient. The gradients of the fresh
// leaves are the node's input gradients, so the outer backward adds them into the real
// parameters as usual: each parameter's hooks fire once, when its gradient is final (gradient
// sync relies on that), and a parameter used in several places still gets one summed gradient.
// The recomputed forward runs the same ops on the same values, so gradients are bit-identical
// to the stored run's. Random streams (dropout) are set back to their state before the forward
// for the recompute, so the masks are the same, and then put back where they were.
//
// Requirements: the modules outlive the backward pass, every parameter and random stream the
// forward uses belongs to them (backward throws InvalidArgument when another tensor that takes
// gradients got one), and their parameters keep their values between this forward and its
// backward (the recompute reads them then).
#ifndef KILN_NN_RECOMPUTE_H_
#define KILN_NN_RECOMPUTE_H_

#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "autodiff/autodiff.h"
#include "nn/module.h"

namespace kiln::nn {

// Callbacks around each recompute in backward: the extension point for parameters that live
// sharded (ZeRO-3): `before` gathers the full parameters into the module (with_value on the
// same leaves), `after` frees them again. Either may be empty. They run on the thread that runs
// backward, before the fresh leaves read the parameters' values and after the nested backward.
struct RecomputeHooks {
  std::function<void()> before;
  std::function<void()> after;
};

template <Backend B>
using ForwardFn = std::function<Tensor<B>(const Tensor<B>&)>;

namespace recompute_internal {

template <class B>
struct AutodiffOf {
  static constexpr bool kIs = false;
};
template <class I>
struct AutodiffOf<Autodiff<I>> {
  static constexpr bool kIs = true;
  using Inner = I;
};

// Runs `f` on scope exit (also when the recompute throws).
template <class F>
class Finally {
 public:
  explicit Finally(F f) : f_(std::move(f)) {}
  ~Finally() { f_(); }
  Finally(const Finally&) = delete;
  Finally& operator=(const Finally&) = delete;

 private:
  F f_;
};

// What the recorded node needs to recompute: the parameters that take gradients, the random
// streams with their states before the forward, the input's value, and the forward itself.
template <Backend I>
struct Saved {
  using AD = Autodiff<I>;
  std::vector<Tensor<AD>*> params;
  std::vector<Generator*> generators;
  std::vector<Generator> states_before;
  typename I::Primitive input;
  ForwardFn<AD> forward;
  RecomputeHooks hooks;
};

// The node's backward: forward again on fresh leaves, recording, then a nested backward.
template <Backend I>
typename Autodiff<I>::Grads Recompute(const Saved<I>& s, const typename I::Primitive& grad, uint32_t needs) {
  using AD = Autodiff<I>;
  using T = Tensor<AD>;
  if (s.hooks.before) s.hooks.before();
  const Finally after([&] {
    if (s.hooks.after) s.hooks.after();
  });
  std::vector<Generator> states_now;
  for (Generator* g : s.generators) states_now.push_back(*g);
  std::vector<T> originals;
  for (T* p : s.params) originals.push_back(*p);
  const Finally restore([&] {
    for (size_t i = 0; i < s.params.size(); ++i) *s.params[i] = originals[i];
    for (size_t i = 0; i < s.generators.size(); ++i) *s.generators[i] = states_now[i];
  });
  for (size_t i = 0; i < s.generators.size(); ++i) *s.generators[i] = s.states_before[i];
  auto fresh = [](const typename I::Primitive& value, bool wanted) {
    return wanted ? T(AD::require_grad(AD::from_inner(value))) : T(AD::from_inner(value));
  };
  const T input = fresh(s.input, AD::Needs(needs, 0));
  for (size_t i = 0; i < s.params.size(); ++i) {
    *s.params[i] = fresh(s.params[i]->primitive().value, AD::Needs(needs, static_cast<int>(i) + 1));
  }
  T out;
  {
    EnableGradScope recording;
    out = s.forward(input);
  }
  const Gradients<I> grads = out.backward(Tensor<I>(grad));
  typename AD::Grads result;
  int64_t found = 0;  // gradients of the fresh leaves
  auto gradient_of = [&](const T& leaf) -> std::optional<typename I::Primitive> {
    const std::optional<Tensor<I>> g = grads.get(leaf);
    if (!g.has_value()) return std::nullopt;
    ++found;
    return g->primitive();
  };
  result.push_back(gradient_of(input));
  for (T* p : s.params) result.push_back(gradient_of(*p));
  // Any other gradient went to a tensor the recompute cannot hand on: it would be lost.
  if (grads.size() > found) {
    ThrowInvalidArgument(
        "recompute: the forward used %d tensor(s) that take gradients and are neither its input nor a parameter of "
        "the recomputed modules; register them as parameters there",
        grads.size() - found);
  }
  return result;
}

}  // namespace recompute_internal

// `forward(x)` with activation checkpointing over `modules`, which own every parameter and
// random stream `forward` uses. Plain forward(x) where nothing is recorded: a backend without
// autodiff, under NoGradScope, or when neither x nor any parameter takes a gradient.
template <Backend B>
Tensor<B> RecomputeForward(const std::vector<Module<B>*>& modules, const Tensor<B>& x, ForwardFn<B> forward,
                           RecomputeHooks hooks = {}) {
  using Info = recompute_internal::AutodiffOf<B>;
  if constexpr (!Info::kIs) {
    return forward(x);
  } else {
    using I = typename Info::Inner;
    auto saved = std::make_shared<recompute_internal::Saved<I>>();
    for (Module<B>* m : modules) {
      for (auto& [name, p] : m->named_parameters()) {
        if (p->requires_grad()) saved->params.push_back(p);
      }
      for (auto& [name, g] : m->named_generators()) saved->generators.push_back(g);
    }
    if (!GradEnabled() || (!x.requires_grad() && saved->params.empty())) return forward(x);
    for (Generator* g : saved->generators) saved->states_before.push_back(*g);
    Tensor<B> out;
    {
      NoGradScope not_recording;
      out = forward(x);
    }
    std::vector<typename B::Primitive> inputs = {x.primitive()};
    for (Tensor<B>* p : saved->params) inputs.push_back(p->primitive());
    saved->input = x.primitive().value;
    saved->forward = std::move(forward);
    saved->hooks = std::move(hooks);
    return Tensor<B>(B::Record(out.primitive().value, inputs, [saved](const typename I::Primitive& g, uint32_t needs) {
      return recompute_internal::Recompute<I>(*saved, g, needs);
    }));
  }
}

// A module run with activation checkpointing: its forward keeps no activations, its backward
// recomputes them. The wrapped module is a transparent child: parameter and random-stream
// names are the wrapped module's own, so checkpoints load with or without the wrapper.
template <Backend B>
class Recompute : public Module<B> {
 public:
  explicit Recompute(std::unique_ptr<Module<B>> inner, RecomputeHooks hooks = {})
      : inner_(this->add_child("", std::move(inner))), hooks_(std::move(hooks)) {}

  Tensor<B> forward(const Tensor<B>& x) override {
    Module<B>* inner = &this->child(inner_);
    return RecomputeForward<B>(
        {inner}, x, [inner](const Tensor<B>& in) { return (*inner)(in); }, hooks_);
  }
  std::unique_ptr<Module<B>> clone() const override { return this->template CloneAs<Recompute>(); }

  Module<B>& inner() { return this->child(inner_); }
  void set_hooks(RecomputeHooks hooks) { hooks_ = std::move(hooks); }

 private:
  size_t inner_;
  RecomputeHooks hooks_;  // copied by clone(): a replica on another device may want its own
};

}  // namespace kiln::nn

#endif  // KILN_NN_RECOMPUTE_H_
