// Checkpoints: a module's parameters (under their plain paths, so PyTorch's load_file reads
// them as a state dict) and optionally an optimizer's state ("optimizer/<slot>/<path>") in
// one safetensors file.
#ifndef KILN_NN_CHECKPOINT_H_
#define KILN_NN_CHECKPOINT_H_

#include <set>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
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

// Every parameter must be in the file with its shape and dtype; nothing is changed unless the
// whole file fits the module (and the optimizer, when one is given).
template <Backend B>
absl::Status LoadCheckpoint(const std::string& path, Module<Autodiff<B>>& module,
                            Optimizer<B>* optimizer = nullptr) {
  absl::StatusOr<TensorFile> file = ReadSafetensors(path);
  if (!file.ok()) return file.status();
  auto params = module.named_parameters();
  std::set<std::string> expected;
  for (auto& [name, p] : params) {
    expected.insert(name);
    const auto it = file->tensors.find(name);
    if (it == file->tensors.end()) {
      return absl::NotFoundError(absl::StrCat(path, " has no tensor for parameter ", name));
    }
    if (it->second.shape() != p->shape() || it->second.dtype() != p->dtype()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": parameter ", name, " is ", DTypeName(it->second.dtype()),
          it->second.shape().ToString(), " in the file but ", p->Describe(), " in the model"));
    }
  }
  for (const auto& [name, data] : file->tensors) {
    if (!expected.contains(name) && name.rfind(kOptimizerPrefix, 0) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, " has tensor ", name, ", which is no parameter of the model"));
    }
  }
  typename Optimizer<B>::State state;
  int64_t steps = 0;
  if (optimizer != nullptr) {
    const auto name = file->metadata.find("optimizer");
    if (name == file->metadata.end() || name->second != optimizer->name() ||
        !absl::SimpleAtoi(file->metadata["optimizer.steps"], &steps)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " holds no state for optimizer ", optimizer->name(),
          name == file->metadata.end() ? "" : absl::StrCat(" (it has ", name->second, ")")));
    }
    const auto device = params.empty() ? typename B::Device{} : params[0].second->device();
    for (const auto& [key, data] : file->tensors) {
      if (key.rfind(kOptimizerPrefix, 0) == 0) {
        state.emplace(key.substr(std::strlen(kOptimizerPrefix)), Tensor<B>::from_data(data, device));
      }
    }
  }
  for (auto& [name, p] : params) {
    *p = p->with_value(Tensor<B>::from_data(file->tensors.at(name), p->device()));
  }
  if (optimizer != nullptr) optimizer->load_state(std::move(state), steps);
  return absl::OkStatus();
}

}  // namespace kiln::nn

#endif  // KILN_NN_CHECKPOINT_H_
