// Module<B>: a layer or a model. It owns named parameters and child modules, which can be
// walked in a stable order ("0.weight", "fc.bias") for optimizers, gradient sync and
// checkpoints, and it can be cloned, also onto another device.
#ifndef KILN_NN_MODULE_H_
#define KILN_NN_MODULE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace kiln::nn {

// A parameter value: a leaf that records gradients when B does (Autodiff), else the value.
template <Backend B>
Tensor<B> AsParameter(const Tensor<B>& value) {
  if constexpr (requires { value.require_grad(); })
    return value.detach().require_grad();
  else
    return value;
}

template <Backend B>
class Module {
 public:
  using Device = typename B::Device;

  Module() = default;
  virtual ~Module() = default;

  virtual Tensor<B> forward(const Tensor<B>& x) = 0;
  // How a parent runs a child: forward, or the wrapper set around it (below).
  Tensor<B> operator()(const Tensor<B>& x) { return around_forward_ ? around_forward_(x) : forward(x); }

  // A function that module(x) runs instead of forward(x); it calls forward itself. ZeRO-3
  // (distributed/sharded_parameters.h) gathers a unit's parameters there. Not copied by clone():
  // it belongs to one replica. Empty: none.
  using AroundForward = std::function<Tensor<B>(const Tensor<B>& x)>;
  void set_around_forward(AroundForward around) { around_forward_ = std::move(around); }

  // A shard unit: under ZeRO-3 its parameters are gathered just before its forward and freed
  // after, so they must be used only inside its forward (a TransformerBlock, a Sequential's
  // layer). Parameters outside every unit are gathered for a whole step. Copied by clone().
  void set_shard_unit(bool on) { shard_unit_ = on; }
  bool shard_unit() const { return shard_unit_; }
  // The outermost shard units below this module (this one alone when it is a unit), in
  // registration order, with their paths.
  std::vector<std::pair<std::string, Module*>> shard_units() {
    std::vector<std::pair<std::string, Module*>> out;
    CollectUnits("", out);
    return out;
  }

  // A deep copy: its parameters are new leaves holding the same values.
  virtual std::unique_ptr<Module> clone() const = 0;
  // A deep copy with every parameter on `device`.
  std::unique_ptr<Module> clone_to(const Device& device) const {
    std::unique_ptr<Module> copy = clone();
    for (auto& [name, p] : copy->named_parameters()) *p = AsParameter(p->detach().to(device));
    return copy;
  }

  // Every parameter, depth-first in registration order, named by its path.
  std::vector<std::pair<std::string, Tensor<B>*>> named_parameters() {
    std::vector<std::pair<std::string, Tensor<B>*>> out;
    Collect("", out);
    return out;
  }
  // Sets parameters by path from `values` (copied to each parameter's device, into the same
  // leaves, so hooks stay registered). Every value must name a parameter of its shape and
  // dtype and, when `strict`, every parameter must be given; nothing changes unless all fit.
  void load_parameters(const std::map<std::string, Tensor<B>>& values, bool strict = true) {
    auto params = named_parameters();
    std::map<std::string, Tensor<B>*> by_name(params.begin(), params.end());
    for (const auto& [name, v] : values) {
      const auto it = by_name.find(name);
      if (it == by_name.end()) ThrowInvalidArgument("load_parameters: the module has no parameter %s", name);
      if (v.shape() != it->second->shape() || v.dtype() != it->second->dtype()) {
        ThrowInvalidArgument("load_parameters: %s is %s, the parameter is %s", name, v.Describe(),
                             it->second->Describe());
      }
    }
    for (const auto& [name, p] : params) {
      if (strict && !values.contains(name)) ThrowInvalidArgument("load_parameters: no value for parameter %s", name);
    }
    for (const auto& entry : params) {
      const auto it = values.find(entry.first);
      if (it == values.end()) continue;
      Tensor<B>& p = *entry.second;
      const Tensor<B> v = it->second.detach().to(p.device());
      if constexpr (requires { p.with_value(v.inner()); }) {
        p = p.with_value(v.inner());
      } else {
        p = v;
      }
    }
  }

  // Every random stream of the model (dropout masks), depth-first, named by path like the
  // parameters: a checkpoint saves their states so a resumed run draws what an uninterrupted
  // one would.
  std::vector<std::pair<std::string, Generator*>> named_generators() {
    std::vector<std::pair<std::string, Generator*>> out;
    CollectGenerators("", out);
    return out;
  }

  int64_t parameter_count() {
    int64_t n = 0;
    for (auto& [name, p] : named_parameters()) n += p->numel();
    return n;
  }

  // Training mode (the default) turns dropout on; eval() turns it off.
  void train(bool on = true) {
    training_ = on;
    for (auto& [name, child] : children_) child->train(on);
  }
  void eval() { train(false); }
  bool is_training() const { return training_; }

  // The dtype this module and its children compute their matmuls in (nn/precision.h); none:
  // their parameters' own.
  void set_compute_dtype(std::optional<DType> dtype) {
    compute_dtype_ = dtype;
    for (auto& [name, child] : children_) child->set_compute_dtype(dtype);
  }
  std::optional<DType> compute_dtype() const { return compute_dtype_; }

 protected:
  Module(const Module& other)
      : params_(other.params_),
        generators_(other.generators_),
        training_(other.training_),
        shard_unit_(other.shard_unit_),
        compute_dtype_(other.compute_dtype_) {
    for (auto& [name, p] : params_) p = AsParameter(p);
    for (const auto& [name, child] : other.children_) children_.emplace_back(name, child->clone());
  }
  Module& operator=(const Module&) = delete;

  // Returns the index by which the subclass reaches it: param(i).
  size_t add_parameter(std::string name, const Tensor<B>& value) {
    params_.emplace_back(std::move(name), AsParameter(value));
    return params_.size() - 1;
  }
  Tensor<B>& param(size_t i) { return params_[i].second; }
  const Tensor<B>& param(size_t i) const { return params_[i].second; }

  // A random stream of the module's own, reached by generator(i); copies take its state.
  size_t add_generator(std::string name, uint64_t seed) {
    generators_.emplace_back(std::move(name), Generator(seed));
    return generators_.size() - 1;
  }
  Generator& generator(size_t i) { return generators_[i].second; }

  // A child named "" is transparent: its parameters and random streams are named as if they
  // were this module's own (a wrapper such as nn::Recompute leaves checkpoints unchanged).
  size_t add_child(std::string name, std::unique_ptr<Module> child) {
    children_.emplace_back(std::move(name), std::move(child));
    return children_.size() - 1;
  }
  Module& child(size_t i) { return *children_[i].second; }
  size_t child_count() const { return children_.size(); }

  // Implements clone() for a subclass with a (protected or public) copy constructor.
  template <class Derived>
  std::unique_ptr<Module> CloneAs() const {
    return std::unique_ptr<Module>(new Derived(static_cast<const Derived&>(*this)));
  }

 private:
  void Collect(const std::string& prefix, std::vector<std::pair<std::string, Tensor<B>*>>& out) {
    for (auto& [name, p] : params_) out.emplace_back(prefix + name, &p);
    for (auto& [name, child] : children_) child->Collect(ChildPrefix(prefix, name), out);
  }

  void CollectGenerators(const std::string& prefix, std::vector<std::pair<std::string, Generator*>>& out) {
    for (auto& [name, g] : generators_) out.emplace_back(prefix + name, &g);
    for (auto& [name, child] : children_) child->CollectGenerators(ChildPrefix(prefix, name), out);
  }
  void CollectUnits(const std::string& path, std::vector<std::pair<std::string, Module*>>& out) {
    if (shard_unit_) {
      out.emplace_back(path, this);
      return;
    }
    for (auto& [name, child] : children_) {
      child->CollectUnits(name.empty() ? path : (path.empty() ? name : path + "." + name), out);
    }
  }
  static std::string ChildPrefix(const std::string& prefix, const std::string& name) {
    return name.empty() ? prefix : prefix + name + ".";
  }

  std::vector<std::pair<std::string, Tensor<B>>> params_;
  std::vector<std::pair<std::string, Generator>> generators_;
  std::vector<std::pair<std::string, std::unique_ptr<Module>>> children_;
  bool training_ = true;
  bool shard_unit_ = false;
  std::optional<DType> compute_dtype_;
  AroundForward around_forward_;
};

}  // namespace kiln::nn

#endif  // KILN_NN_MODULE_H_
