// nanoGPT's names for nn::Gpt's parameters, so a kiln GPT loads into nanoGPT's `GPT` class
// (load_state_dict(strict=True)) and a nanoGPT checkpoint, saved as safetensors, loads into
// nn::Gpt to train on. The layouts already agree: Linear weights are [out, in] as PyTorch's,
// the fused q|k|v projection is split by output rows in the same order, and the head is tied
// to the token embedding. Only the names differ:
//   wte.weight, wpe.weight, ln_f.*       <-> transformer.wte.weight, transformer.wpe.weight, transformer.ln_f.*
//   h.N.ln_1.*, h.N.ln_2.*               <-> transformer.h.N.ln_1.*, transformer.h.N.ln_2.*
//   h.N.attn.qkv.*, h.N.attn.proj.*      <-> transformer.h.N.attn.c_attn.*, transformer.h.N.attn.c_proj.*
//   h.N.mlp.fc.*, h.N.mlp.proj.*         <-> transformer.h.N.mlp.c_fc.*, transformer.h.N.mlp.c_proj.*
//   (the tied head)                      <-> lm_head.weight, equal to transformer.wte.weight
// nanoGPT on PyTorch before 2.0 also saves each block's causal mask (attn.bias, a buffer, not
// a parameter); reading skips it. nanoGPT's blocks use the exact GELU: build the kiln model
// with GptConfig::gelu = kNone for the same logits.
#ifndef KILN_NN_NANOGPT_LAYOUT_H_
#define KILN_NN_NANOGPT_LAYOUT_H_

#include <string>

#include "absl/status/statusor.h"
#include "nn/safetensors.h"

namespace kiln::nn {

// The nanoGPT name of a kiln GPT parameter; InvalidArgument for a name nn::Gpt does not have.
absl::StatusOr<std::string> NanoGptName(const std::string& kiln_name);
// The kiln name of a nanoGPT tensor; "" for what kiln does not keep (the causal masks and the
// tied lm_head.weight); InvalidArgument for a name nanoGPT's GPT does not have.
absl::StatusOr<std::string> KilnNameOfNanoGpt(const std::string& nanogpt_name);

// A kiln GPT's parameters (a checkpoint's tensors) under nanoGPT's names, lm_head.weight added.
absl::StatusOr<TensorFile> ToNanoGptLayout(const TensorFile& kiln);
// A nanoGPT file's tensors under kiln's names (masks dropped). `path` names the file in errors:
// an unknown name, or an lm_head.weight other than transformer.wte.weight (kiln ties them).
absl::StatusOr<TensorFile> FromNanoGptLayout(const TensorFile& nanogpt, const std::string& path);

}  // namespace kiln::nn

#endif  // KILN_NN_NANOGPT_LAYOUT_H_
