// Checkpoints: a module's parameters (under their plain paths, so PyTorch's load_file reads
// them as a state dict) and optionally an optimizer's state ("optimizer/<slot>/<path>") in
// one safetensors file.
#ifndef KILN_NN_CHECKPOINT_H_
#define KILN_NN_CHECKPOINT_H_

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nn/convert_dtype.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/safetensors.h"

namespace kiln::nn {

inline constexpr char kOptimizerPrefix[] = "optimizer/";

// How a checkpoint's tensors are fitted to a module.
struct LoadOptions {
  // Off (the default), every tensor must have its parameter's dtype: a bf16 file loaded into
  // an f32 model (or the reverse) is an InvalidArgument naming the parameter and both dtypes,
  // since a silent change of precision is rarely what was meant. On, a floating tensor (f64,
  // f32, bf16, f16) of another dtype is converted to its parameter's dtype, optimizer state
  // too, with kiln's rounding (ConvertDType: f32 -> bf16 to nearest even, bf16 -> f32 exact).
  // Integer and bool tensors are never converted.
  //   nn::LoadCheckpoint(path, model, {.convert_dtype = true});
  bool convert_dtype = false;
};

template <Backend B>
absl::Status SaveCheckpoint(const std::string& path, Module<Autodiff<B>>& module,
                            const Optimizer<B>* optimizer = nullptr) {
  TensorFile file;
  for (auto& [name, p] : module.named_parameters()) file.tensors.emplace(name, p->to_data());
  file.metadata["format"] = "kiln";
  if (optimizer != nullptr) {
    file.metadata["optimizer"] = optimizer->name();
    file.metadata["optimizer.steps"] = absl::StrCat(optimizer->steps());
    file.metadata["optimizer.lr"] = absl::StrCat(optimizer->lr());
    for (const auto& [key, t] : optimizer->state()) {
      file.tensors.emplace(kOptimizerPrefix + key, t.to_data());
    }
  }
  return WriteSafetensors(path, file);
}

// A checkpoint's "optimizer.steps": digits only (no sign, space or exponent) and at most
// kMaxOptimizerSteps, so that training on can neither overflow nor miscount.
inline bool ParseOptimizerSteps(const std::string& text, int64_t* steps) {
  if (text.empty() || text.size() > 16) return false;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
  }
  return absl::SimpleAtoi(text, steps) && *steps <= kMaxOptimizerSteps;
}

namespace checkpoint_internal {

// Whether `data` (tensor `key` of `path`) can be the value of parameter `name`, `p`, or,
// for optimizer state, of its slot: the same shape, and the same dtype unless
// options.convert_dtype allows converting it.
template <Backend B>
absl::Status CheckFits(const TensorData& data, const std::string& path, const std::string& key, const std::string& name,
                       const Tensor<Autodiff<B>>& p, const LoadOptions& options) {
  const bool state = key != name;
  if (data.shape() != p.shape() || (data.dtype() != p.dtype() && !options.convert_dtype)) {
    if (!state && data.shape() == p.shape()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", name, " is ", DTypeName(data.dtype()),
                                                     " in the file but ", DTypeName(p.dtype()),
                                                     " in the model (LoadOptions{.convert_dtype = true} converts it)"));
    }
    if (!state) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", name, " is ", DTypeName(data.dtype()),
                                                     data.shape().ToString(), " in the file but ", p.Describe(),
                                                     " in the model"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": optimizer state ", key, " is ", DTypeName(data.dtype()), data.shape().ToString(),
        " in the file but must be ", DTypeName(p.dtype()), p.shape().ToString(), " like parameter ", name));
  }
  if (data.dtype() != p.dtype() && !CanConvertDType(data.dtype(), p.dtype())) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", state ? "optimizer state " : "parameter ", key, " is ",
                                                   DTypeName(data.dtype()), " in the file but ", DTypeName(p.dtype()),
                                                   " in the model; only floating dtypes are converted"));
  }
  return absl::OkStatus();
}

// `data` as a tensor of `p`'s dtype on `p`'s device (CheckFits passed).
template <Backend B>
Tensor<B> ValueFor(const TensorData& data, const Tensor<Autodiff<B>>& p) {
  if (data.dtype() == p.dtype()) return Tensor<B>::from_data(data, p.device());
  return Tensor<B>::from_data(ConvertDType(data, p.dtype()), p.device());
}

template <Backend B>
using ByName = std::map<std::string, Tensor<Autodiff<B>>*>;

// Every parameter in the file and fitting it, and no tensor in the file but the parameters and
// optimizer state; the parameters by name.
template <Backend B>
absl::Status CheckParameters(const TensorFile& file, const std::string& path,
                             const std::vector<std::pair<std::string, Tensor<Autodiff<B>>*>>& params,
                             const LoadOptions& options, ByName<B>& by_name) {
  for (auto& [name, p] : params) {
    by_name.emplace(name, p);
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      return absl::NotFoundError(absl::StrCat(path, " has no tensor for parameter ", name));
    }
    if (absl::Status s = CheckFits(it->second, path, name, name, *p, options); !s.ok()) return s;
  }
  for (const auto& [name, data] : file.tensors) {
    if (!by_name.contains(name) && name.rfind(kOptimizerPrefix, 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has tensor ", name, ", which is no parameter of the model"));
    }
  }
  return absl::OkStatus();
}

// The file's optimizer steps, once its metadata names `optimizer`.
template <Backend B>
absl::Status ReadOptimizerSteps(const TensorFile& file, const std::string& path, const Optimizer<B>& optimizer,
                                int64_t& steps) {
  const auto name = file.metadata.find("optimizer");
  if (name == file.metadata.end() || name->second != optimizer.name()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " holds no state for optimizer ", optimizer.name(),
                     name == file.metadata.end() ? "" : absl::StrCat(" (it has ", name->second, ")")));
  }
  const auto count = file.metadata.find("optimizer.steps");
  if (count == file.metadata.end() || !ParseOptimizerSteps(count->second, &steps)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": optimizer.steps is ",
                     count == file.metadata.end() ? "missing" : absl::StrCat("\"", count->second, "\""),
                     ", not a whole number from 0 to 2^53"));
  }
  return absl::OkStatus();
}

// The file's "optimizer/<slot>/<path>" tensors as `optimizer`'s state: each one of its slots
// for a parameter of the model, fitting that parameter, and each parameter with all its
// slots or none.
template <Backend B>
absl::Status ReadOptimizerState(const TensorFile& file, const std::string& path, const Optimizer<B>& optimizer,
                                const ByName<B>& by_name, const LoadOptions& options,
                                typename Optimizer<B>::State& state) {
  const std::vector<std::string> slots = optimizer.slots();
  const std::string kept = slots.empty() ? "none" : absl::StrJoin(slots, ", ");
  std::map<std::string, int> slots_of;  // parameter path -> how many of its slots are here
  for (const auto& [key, data] : file.tensors) {
    if (key.rfind(kOptimizerPrefix, 0) != 0) continue;
    const std::string rest = key.substr(std::strlen(kOptimizerPrefix));
    const size_t slash = rest.find('/');
    const std::string slot = rest.substr(0, slash);
    if (slash == std::string::npos || std::find(slots.begin(), slots.end(), slot) == slots.end()) {
      return absl::InvalidArgumentError(absl::StrCat(path, " has tensor ", key, ", which is no state of ",
                                                     optimizer.name(), " (its slots: ", kept, ")"));
    }
    const auto param = by_name.find(rest.substr(slash + 1));
    if (param == by_name.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has tensor ", key, ", but the model has no parameter ", rest.substr(slash + 1)));
    }
    const Tensor<Autodiff<B>>& p = *param->second;
    if (absl::Status s = CheckFits(data, path, key, param->first, p, options); !s.ok()) return s;
    ++slots_of[param->first];
    state.emplace(rest, ValueFor(data, p));
  }
  // A parameter with only some slots would step from a zero in the others (AdamW with a
  // momentum but no variance divides by almost nothing).
  for (const auto& [param, n] : slots_of) {
    if (n != static_cast<int>(slots.size())) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", param, " has ", n, " of the ", slots.size(),
                                                     " optimizer slots (", kept,
                                                     ") in the file; it needs all of them or none"));
    }
  }
  return absl::OkStatus();
}

}  // namespace checkpoint_internal

// Every parameter must be in the file with its shape and dtype (or, with
// options.convert_dtype, a floating dtype converted to it); nothing is changed unless the
// whole file fits the module (and the optimizer, when one is given). With an optimizer, each
// "optimizer/<slot>/<path>" tensor must be one of its slots() for a parameter of the model,
// with that parameter's shape and dtype (the same conversion applies), and a parameter has
// either all its slots or none. `path` names the file in errors.
template <Backend B>
absl::Status LoadCheckpointFrom(const TensorFile& file, const std::string& path, Module<Autodiff<B>>& module,
                                Optimizer<B>* optimizer = nullptr, const LoadOptions& options = {}) {
  auto params = module.named_parameters();
  checkpoint_internal::ByName<B> by_name;
  if (absl::Status s = checkpoint_internal::CheckParameters<B>(file, path, params, options, by_name); !s.ok()) return s;
  typename Optimizer<B>::State state;
  int64_t steps = 0;
  if (optimizer != nullptr) {
    if (absl::Status s = checkpoint_internal::ReadOptimizerSteps(file, path, *optimizer, steps); !s.ok()) return s;
    if (absl::Status s = checkpoint_internal::ReadOptimizerState(file, path, *optimizer, by_name, options, state);
        !s.ok()) {
      return s;
    }
  }
  std::vector<Tensor<B>> values;
  for (auto& [name, p] : params) values.push_back(checkpoint_internal::ValueFor(file.tensors.at(name), *p));
  for (size_t i = 0; i < params.size(); ++i) *params[i].second = params[i].second->with_value(values[i]);
  if (optimizer != nullptr) optimizer->load_state(std::move(state), steps);
  return absl::OkStatus();
}

// LoadCheckpointFrom the safetensors file at `path`.
template <Backend B>
absl::Status LoadCheckpoint(const std::string& path, Module<Autodiff<B>>& module, Optimizer<B>* optimizer = nullptr,
                            const LoadOptions& options = {}) {
  absl::StatusOr<TensorFile> file = ReadSafetensors(path);
  if (!file.ok()) return file.status();
  return LoadCheckpointFrom(*file, path, module, optimizer, options);
}

// The parameters alone, with `options`: LoadCheckpoint(path, model, {.convert_dtype = true}).
template <Backend B>
absl::Status LoadCheckpoint(const std::string& path, Module<Autodiff<B>>& module, const LoadOptions& options) {
  return LoadCheckpoint<B>(path, module, nullptr, options);
}

}  // namespace kiln::nn

#endif  // KILN_NN_CHECKPOINT_H_
