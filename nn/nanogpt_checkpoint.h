// A GPT's parameters in nanoGPT's layout (nanogpt_layout.h): written for PyTorch users, read to
// fine-tune what nanoGPT trained. Errors name the tensors by nanoGPT's names.
#ifndef KILN_NN_NANOGPT_CHECKPOINT_H_
#define KILN_NN_NANOGPT_CHECKPOINT_H_

#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "nn/checkpoint.h"
#include "nn/nanogpt_layout.h"

namespace kiln::nn {

// The module's parameters (an nn::Gpt's) as a nanoGPT state dict in safetensors at `path`.
template <Backend B>
absl::Status SaveNanoGpt(const std::string& path, Module<Autodiff<B>>& module) {
  TensorFile file;
  for (auto& [name, p] : module.named_parameters()) file.tensors.emplace(name, p->to_data());
  absl::StatusOr<TensorFile> nano = ToNanoGptLayout(file);
  if (!nano.ok()) return nano.status();
  return WriteSafetensors(path, *nano);
}

// Every parameter of the module from the nanoGPT state dict at `path` (half and f32 tensors
// converted to the parameters' dtypes). InvalidArgument naming the tensor for one the model
// lacks, one it needs that the file lacks, or a shape that differs; nothing changes then.
template <Backend B>
absl::Status LoadNanoGpt(const std::string& path, Module<Autodiff<B>>& module) {
  absl::StatusOr<TensorFile> file = ReadSafetensors(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<TensorFile> kiln = FromNanoGptLayout(*file, path);
  if (!kiln.ok()) return kiln.status();
  std::map<std::string, Tensor<Autodiff<B>>*> params;
  for (auto& [name, p] : module.named_parameters()) params.emplace(name, p);
  for (const auto& [name, data] : kiln->tensors) {
    if (!params.contains(name)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", *NanoGptName(name), " is not in the model (",
                                                     data.shape().ToString(), "): another depth or layout"));
    }
  }
  for (const auto& [name, p] : params) {
    absl::StatusOr<std::string> nano = NanoGptName(name);
    if (!nano.ok()) return nano.status();
    const auto it = kiln->tensors.find(name);
    if (it == kiln->tensors.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": no ", *nano, " for the model's ", name, " ", p->shape().ToString()));
    }
    if (it->second.shape() != p->shape()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": ", *nano, " is ", it->second.shape().ToString(),
                                                     " but the model's ", name, " is ", p->shape().ToString()));
    }
  }
  return LoadCheckpointFrom<B>(*kiln, path, module, nullptr, {.convert_dtype = true});
}

}  // namespace kiln::nn

#endif  // KILN_NN_NANOGPT_CHECKPOINT_H_
