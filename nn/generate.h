// Sampling from a GPT: each new token drawn from the last position's logits (temperature, top-k),
// one draw of the generator per token. With the key-value cache (the default) the prompt runs
// once and every later step runs one position through the model; without it every step runs
// the whole window again. Once the sequence outgrows the positional table, each step runs the
// window of its last `context` tokens whole in both ways (the positions of all of them shift).
// Both ways pick the same tokens for the same seed unless two choices tie to within roundoff.
#ifndef KILN_NN_GENERATE_H_
#define KILN_NN_GENERATE_H_

#include <algorithm>
#include <cmath>
#include <vector>

#include "nn/gpt.h"

namespace kiln::nn {

struct SamplingOptions {
  double temperature = 1.0;  // > 0
  int top_k = 0;             // draw among the k likeliest (0: all)
  bool kv_cache = true;
};

// A token drawn from `logits` (one row, f64) with one draw of `gen`.
inline int64_t PickToken(std::vector<double> logits, const SamplingOptions& o, Generator& gen) {
  std::vector<double> sorted = logits;
  std::sort(sorted.rbegin(), sorted.rend());
  const int k = std::min<int>(o.top_k, static_cast<int>(sorted.size()));
  const double floor = k > 0 ? sorted[k - 1] : -INFINITY;
  double total = 0;
  for (double& l : logits) total += (l = l >= floor ? std::exp((l - sorted[0]) / o.temperature) : 0);
  double u = static_cast<double>(gen.NextU64() >> 11) / 9007199254740992.0 * total;
  int64_t pick = 0;
  const int64_t last = static_cast<int64_t>(logits.size()) - 1;
  while (pick < last && u >= logits[pick]) u -= logits[pick++];
  return pick;
}

// `count` tokens after `prompt` (at least one token), in eval mode, recording nothing.
template <Backend B>
std::vector<int64_t> Generate(Gpt<B>& model, std::vector<int64_t> prompt, int count, Generator& gen,
                              const SamplingOptions& o = {}, const typename B::Device& device = {}) {
  if (prompt.empty()) ThrowInvalidArgument("Generate: needs a prompt of at least one token");
  NoGradScope no_grad;
  const bool training = model.is_training();
  model.eval();
  const int64_t context = model.config().context;
  typename Gpt<B>::Cache cache;
  std::vector<int64_t> ids = std::move(prompt), out;
  auto last_logits = [&](const Tensor<B>& logits) {
    const int64_t s = logits.size(1);
    return logits.slice(1, s - 1, s).to(DType::kF64).to_data().ToDoubles();
  };
  for (int n = 0; n < count; ++n) {
    const int64_t size = static_cast<int64_t>(ids.size());
    std::vector<double> logits;
    if (o.kv_cache && cache.length > 0 && cache.length < context) {  // one new position
      logits = last_logits(
          model.forward_cached(Tensor<B>::from_vector(std::vector<int64_t>{ids.back()}, {1, 1}, device), cache));
    } else {  // the window whole: the first step, no cache, or the table outgrown
      const int64_t from = std::max<int64_t>(0, size - context);
      const auto x =
          Tensor<B>::from_vector(std::vector<int64_t>(ids.begin() + from, ids.end()), {1, size - from}, device);
      cache = {};
      logits = last_logits(o.kv_cache ? model.forward_cached(x, cache) : model(x));
    }
    ids.push_back(PickToken(std::move(logits), o, gen));
    out.push_back(ids.back());
  }
  model.train(training);
  return out;
}

}  // namespace kiln::nn

#endif  // KILN_NN_GENERATE_H_
