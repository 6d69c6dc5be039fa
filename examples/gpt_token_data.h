// examples/gpt on a token dataset (--train_data, --val_data): the memory-mapped splits, the
// window order of the training split, and the batches read from them in the shape the
// in-memory corpus gives (inputs and next-token targets, [count, context] i64).
#ifndef KILN_EXAMPLES_GPT_TOKEN_DATA_H_
#define KILN_EXAMPLES_GPT_TOKEN_DATA_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "data/token_dataset.h"
#include "data/window_sampler.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace kiln {

struct GptTokenData {
  data::TokenDataset train, val;
  data::WindowSampler sampler;  // the training split's order
  int64_t vocab = 0;            // the model's: both splits' ids are below it
};

struct GptTokenDataOptions {
  std::string train, val;  // val empty: the last 10% of train's tokens validate
  data::TokenFormat format = data::TokenFormat::kAuto;
  int64_t vocab = 0;  // 0: from the data (the larger of the splits' vocabularies)
  int64_t context = 64;
  uint64_t seed = 0;
};

// InvalidArgument naming the flag and the file: what TokenDataset::Open refuses, and a split
// with fewer than context + 1 tokens.
absl::StatusOr<GptTokenData> OpenGptTokenData(const GptTokenDataOptions& options);

// Inputs and next-token targets [count, context] from the windows of `tokens` at `starts`.
template <Backend B>
std::pair<Tensor<B>, Tensor<B>> Windows(const data::TokenDataset& tokens, const std::vector<int64_t>& starts,
                                        int64_t context, const typename B::Device& device) {
  std::vector<int64_t> x, y, window(context + 1);
  x.reserve(starts.size() * context);
  y.reserve(starts.size() * context);
  for (int64_t s : starts) {
    // Starts come from the sampler or the validation's even spacing, inside the split.
    ThrowIfError(tokens.Read(s, absl::MakeSpan(window)));
    x.insert(x.end(), window.begin(), window.end() - 1);
    y.insert(y.end(), window.begin() + 1, window.end());
  }
  const int64_t n = static_cast<int64_t>(starts.size());
  return {Tensor<B>::from_vector(x, {n, context}, device), Tensor<B>::from_vector(y, {n, context}, device)};
}

}  // namespace kiln

#endif  // KILN_EXAMPLES_GPT_TOKEN_DATA_H_
