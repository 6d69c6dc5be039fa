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
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/safetensors.h"

namespace kiln::nn {

inline constexpr char kOptimizerPrefix[] = "optimizer/";

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

// Every parameter must be in the file with its shape and dtype; nothing is changed unless the
// whole file fits the module (and the optimizer, when one is given). With an optimizer, each
// "optimizer/<slot>/<path>" tensor must be one of its slots() for a parameter of the model,
// with that parameter's shape and dtype, and a parameter has either all its slots or none.
// `path` names the file in errors.
template <Backend B>
absl::Status LoadCheckpointFrom(const TensorFile& file, const std::string& path, Module<Autodiff<B>>& module,
                                Optimizer<B>* optimizer = nullptr) {
  auto params = module.named_parameters();
  std::map<std::string, Tensor<Autodiff<B>>*> by_name;
  for (auto& [name, p] : params) {
    by_name.emplace(name, p);
    const auto it = file.tensors.find(name);
    if (it == file.tensors.end()) {
      return absl::NotFoundError(absl::StrCat(path, " has no tensor for parameter ", name));
    }
    if (it->second.shape() != p->shape() || it->second.dtype() != p->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", name, " is ", DTypeName(it->second.dtype()),
                                                     it->second.shape().ToString(), " in the file but ", p->Describe(),
                                                     " in the model"));
    }
  }
  for (const auto& [name, data] : file.tensors) {
    if (!by_name.contains(name) && name.rfind(kOptimizerPrefix, 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has tensor ", name, ", which is no parameter of the model"));
    }
  }
  typename Optimizer<B>::State state;
  int64_t steps = 0;
  if (optimizer != nullptr) {
    const auto name = file.metadata.find("optimizer");
    if (name == file.metadata.end() || name->second != optimizer->name()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " holds no state for optimizer ", optimizer->name(),
                       name == file.metadata.end() ? "" : absl::StrCat(" (it has ", name->second, ")")));
    }
    const auto count = file.metadata.find("optimizer.steps");
    if (count == file.metadata.end() || !ParseOptimizerSteps(count->second, &steps)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": optimizer.steps is ",
                       count == file.metadata.end() ? "missing" : absl::StrCat("\"", count->second, "\""),
                       ", not a whole number from 0 to 2^53"));
    }
    const std::vector<std::string> slots = optimizer->slots();
    const std::string kept = slots.empty() ? "none" : absl::StrJoin(slots, ", ");
    std::map<std::string, int> slots_of;  // parameter path -> how many of its slots are here
    for (const auto& [key, data] : file.tensors) {
      if (key.rfind(kOptimizerPrefix, 0) != 0) continue;
      const std::string rest = key.substr(std::strlen(kOptimizerPrefix));
      const size_t slash = rest.find('/');
      const std::string slot = rest.substr(0, slash);
      if (slash == std::string::npos || std::find(slots.begin(), slots.end(), slot) == slots.end()) {
        return absl::InvalidArgumentError(absl::StrCat(path, " has tensor ", key, ", which is no state of ",
                                                       optimizer->name(), " (its slots: ", kept, ")"));
      }
      const auto param = by_name.find(rest.substr(slash + 1));
      if (param == by_name.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, " has tensor ", key, ", but the model has no parameter ", rest.substr(slash + 1)));
      }
      const Tensor<Autodiff<B>>& p = *param->second;
      if (data.shape() != p.shape() || data.dtype() != p.dtype()) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": optimizer state ", key, " is ", DTypeName(data.dtype()), data.shape().ToString(),
            " in the file but must be ", DTypeName(p.dtype()), p.shape().ToString(), " like parameter ", param->first));
      }
      ++slots_of[param->first];
      state.emplace(rest, Tensor<B>::from_data(data, p.device()));
    }
    // A parameter with only some slots would step from a zero in the others (AdamW with a
    // momentum but no variance divides by almost nothing).
    for (const auto& [param, n] : slots_of) {
      if (n != static_cast<int>(slots.size())) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": parameter ", param, " has ", n, " of the ",
                                                       slots.size(), " optimizer slots (", kept,
                                                       ") in the file; it needs all of them or none"));
      }
    }
  }
  std::vector<Tensor<B>> values;
  for (auto& [name, p] : params) values.push_back(Tensor<B>::from_data(file.tensors.at(name), p->device()));
  for (size_t i = 0; i < params.size(); ++i) *params[i].second = params[i].second->with_value(values[i]);
  if (optimizer != nullptr) optimizer->load_state(std::move(state), steps);
  return absl::OkStatus();
}

// LoadCheckpointFrom the safetensors file at `path`.
template <Backend B>
absl::Status LoadCheckpoint(const std::string& path, Module<Autodiff<B>>& module, Optimizer<B>* optimizer = nullptr) {
  absl::StatusOr<TensorFile> file = ReadSafetensors(path);
  if (!file.ok()) return file.status();
  return LoadCheckpointFrom(*file, path, module, optimizer);
}

}  // namespace kiln::nn

#endif  // KILN_NN_CHECKPOINT_H_
