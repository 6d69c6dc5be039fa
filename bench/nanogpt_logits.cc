// nn::Gpt's logits for one sequence, its parameters read from a nanoGPT state dict (safetensors):
// what bench/nanogpt_compat.sh compares with nanoGPT's GPT in PyTorch.
//
//   bazel-bin/bench/nanogpt_logits --file=nano.safetensors --layers=2 --heads=2 --width=16 \
//     --context=16 --ids=1,2,3 --out=logits.safetensors
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/gpt.h"
#include "nn/nanogpt_checkpoint.h"

ABSL_FLAG(std::string, file, "", "nanoGPT state dict (safetensors)");
ABSL_FLAG(std::string, out, "", "where the logits [1, T, vocab] are written (safetensors, key \"logits\")");
ABSL_FLAG(std::string, ids, "", "the sequence: comma-separated token ids");
ABSL_FLAG(int, vocab, 256, "vocabulary");
ABSL_FLAG(int, context, 64, "positions");
ABSL_FLAG(int, layers, 4, "blocks");
ABSL_FLAG(int, heads, 4, "heads");
ABSL_FLAG(int, width, 128, "width");

namespace kiln {
namespace {

int Main() {
  using ADB = Autodiff<Cpu>;
  std::vector<int64_t> ids;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_ids), ',')) {
    int64_t id = 0;
    if (!absl::SimpleAtoi(s, &id)) {
      std::fprintf(stderr, "--ids: '%s' is not an integer\n", std::string(s).c_str());
      return 2;
    }
    ids.push_back(id);
  }
  Generator gen(1);
  nn::Gpt<ADB> model({.vocab = absl::GetFlag(FLAGS_vocab),
                      .context = absl::GetFlag(FLAGS_context),
                      .layers = absl::GetFlag(FLAGS_layers),
                      .heads = absl::GetFlag(FLAGS_heads),
                      .width = absl::GetFlag(FLAGS_width),
                      .gelu = nn::functional::GeluApproximation::kNone},
                     gen);
  if (absl::Status s = nn::LoadNanoGpt<Cpu>(absl::GetFlag(FLAGS_file), model); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  model.eval();
  NoGradScope no_grad;
  const auto x = Tensor<ADB>::from_vector(ids, {1, static_cast<int64_t>(ids.size())});
  nn::TensorFile out;
  out.tensors.emplace("logits", model(x).to_data());
  if (absl::Status s = nn::WriteSafetensors(absl::GetFlag(FLAGS_out), out); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return kiln::Main();
}
