#include "nn/nanogpt_layout.h"

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace kiln::nn {
namespace {

constexpr char kHead[] = "lm_head.weight";
constexpr char kTokenEmbedding[] = "transformer.wte.weight";

// Inside a block: kiln's part name and nanoGPT's (each followed by ".weight" or ".bias").
constexpr std::pair<const char*, const char*> kBlockParts[] = {
    {"ln_1", "ln_1"}, {"attn.qkv", "attn.c_attn"}, {"attn.proj", "attn.c_proj"},
    {"ln_2", "ln_2"}, {"mlp.fc", "mlp.c_fc"},      {"mlp.proj", "mlp.c_proj"},
};

// "N." at the front of `rest` (N a block index without a sign or leading zero), consumed.
bool ConsumeBlockIndex(absl::string_view& rest, std::string& index) {
  const size_t dot = rest.find('.');
  if (dot == absl::string_view::npos || dot == 0 || (dot > 1 && rest[0] == '0')) return false;
  int64_t n = 0;
  if (!absl::SimpleAtoi(rest.substr(0, dot), &n) || n < 0 || !std::isdigit(rest[0])) return false;
  index = std::string(rest.substr(0, dot));
  rest.remove_prefix(dot + 1);
  return true;
}

bool IsWeightOrBias(absl::string_view s) { return s == "weight" || s == "bias"; }

// A block parameter's name in the other layout (`to_nano`: kiln -> nanoGPT), or "".
std::string BlockName(absl::string_view rest, bool to_nano) {
  std::string index;
  if (!ConsumeBlockIndex(rest, index)) return "";
  for (const auto& [kiln, nano] : kBlockParts) {
    absl::string_view part = rest;
    if (!absl::ConsumePrefix(&part, to_nano ? kiln : nano) || !absl::ConsumePrefix(&part, ".") ||
        !IsWeightOrBias(part)) {
      continue;
    }
    return absl::StrCat(to_nano ? "transformer.h." : "h.", index, ".", to_nano ? nano : kiln, ".", part);
  }
  return "";
}

bool SameTensor(const TensorData& a, const TensorData& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && a.nbytes() == b.nbytes() &&
         std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())) == 0;
}

}  // namespace

absl::StatusOr<std::string> NanoGptName(const std::string& kiln_name) {
  if (kiln_name == "wte.weight" || kiln_name == "wpe.weight" || kiln_name == "ln_f.weight" ||
      kiln_name == "ln_f.bias") {
    return absl::StrCat("transformer.", kiln_name);
  }
  absl::string_view rest = kiln_name;
  if (absl::ConsumePrefix(&rest, "h.")) {
    std::string name = BlockName(rest, /*to_nano=*/true);
    if (!name.empty()) return name;
  }
  return absl::InvalidArgumentError(absl::StrCat("nanoGPT layout: ", kiln_name, " is not a parameter of nn::Gpt"));
}

absl::StatusOr<std::string> KilnNameOfNanoGpt(const std::string& nanogpt_name) {
  if (nanogpt_name == kHead) return std::string();
  absl::string_view rest = nanogpt_name;
  if (absl::ConsumePrefix(&rest, "transformer.")) {
    if (rest == "wte.weight" || rest == "wpe.weight" || rest == "ln_f.weight" || rest == "ln_f.bias") {
      return std::string(rest);
    }
    std::string index;
    if (absl::ConsumePrefix(&rest, "h.")) {
      absl::string_view after = rest;
      if (ConsumeBlockIndex(after, index) && (after == "attn.bias" || after == "attn.masked_bias")) return "";
      std::string name = BlockName(rest, /*to_nano=*/false);
      if (!name.empty()) return name;
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("nanoGPT layout: ", nanogpt_name,
                                                 " is not a tensor of nanoGPT's GPT (transformer.wte.weight, "
                                                 "transformer.h.N.attn.c_attn.weight, ..., lm_head.weight)"));
}

absl::StatusOr<TensorFile> ToNanoGptLayout(const TensorFile& kiln) {
  TensorFile out;
  for (const auto& [name, data] : kiln.tensors) {
    absl::StatusOr<std::string> nano = NanoGptName(name);
    if (!nano.ok()) return nano.status();
    out.tensors.emplace(*nano, data);
  }
  const auto wte = out.tensors.find(kTokenEmbedding);
  if (wte == out.tensors.end()) return absl::InvalidArgumentError("nanoGPT layout: no wte.weight to tie lm_head to");
  out.tensors.emplace(kHead, wte->second);
  out.metadata["format"] = "pt";  // what nanoGPT-side tooling (safetensors.torch) expects
  return out;
}

absl::StatusOr<TensorFile> FromNanoGptLayout(const TensorFile& nanogpt, const std::string& path) {
  TensorFile out;
  out.metadata["format"] = "kiln";
  for (const auto& [name, data] : nanogpt.tensors) {
    absl::StatusOr<std::string> kiln = KilnNameOfNanoGpt(name);
    if (!kiln.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", kiln.status().message()));
    if (!kiln->empty()) out.tensors.emplace(*kiln, data);
  }
  const auto head = nanogpt.tensors.find(kHead);
  const auto wte = nanogpt.tensors.find(kTokenEmbedding);
  if (head != nanogpt.tensors.end() && (wte == nanogpt.tensors.end() || !SameTensor(head->second, wte->second))) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": lm_head.weight differs from ", kTokenEmbedding,
                                                   ": nn::Gpt ties its head to the token embedding"));
  }
  return out;
}

}  // namespace kiln::nn
