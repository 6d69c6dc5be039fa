// The order in which a training run sees a token stream: the stream cut into windows of
// context + 1 tokens (inputs and their next-token targets; window w starts at token w *
// context, so each prediction falls in exactly one window), each epoch visiting every window
// once in an order drawn from the seed and the epoch. A global batch is the next `batch`
// windows of that order, and global member g of n takes rows [batch * g / n, batch * (g + 1) / n)
// of it, as DataParallel splits a batch: every member of every process sees different
// windows, and none is seen twice in an epoch. The order needs no memory (a keyed permutation
// computed per index), and where the run stands is two integers that a checkpoint keeps.
#ifndef KILN_DATA_WINDOW_SAMPLER_H_
#define KILN_DATA_WINDOW_SAMPLER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::data {

struct SamplerPosition {
  int64_t epoch = 0;  // 0-based
  int64_t drawn = 0;  // windows of `epoch` handed out so far
  bool operator==(const SamplerPosition&) const = default;
};

class WindowSampler {
 public:
  // InvalidArgument when `tokens` cannot hold one window of context + 1.
  static absl::StatusOr<WindowSampler> Create(int64_t tokens, int64_t context, uint64_t seed);

  int64_t windows() const { return windows_; }  // per epoch
  int64_t context() const { return context_; }
  // The first token of the k-th window in `epoch`'s order (k < windows()).
  int64_t Start(int64_t epoch, int64_t k) const;
  // The starts of the `count` windows after `at`, moving `at` past them (into the next epoch
  // where one ends).
  std::vector<int64_t> Next(int64_t count, SamplerPosition& at) const;
  // Where a run stands after `steps` batches of `count` from the start (a checkpoint's check).
  SamplerPosition After(int64_t steps, int64_t count) const;

 private:
  WindowSampler(int64_t windows, int64_t context, uint64_t seed, int half_bits)
      : windows_(windows), context_(context), seed_(seed), half_bits_(half_bits) {}
  uint64_t Permute(uint64_t key, uint64_t index) const;  // a bijection of [0, 4^half_bits)

  int64_t windows_, context_;
  uint64_t seed_;
  int half_bits_;
};

// Global member g's rows of a batch of `count`, out of n members: [count*g/n, count*(g+1)/n).
std::pair<int64_t, int64_t> MemberRows(int64_t count, int g, int n);

}  // namespace kiln::data

#endif  // KILN_DATA_WINDOW_SAMPLER_H_
