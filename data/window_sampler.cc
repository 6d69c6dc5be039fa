#include "data/window_sampler.h"

#include "absl/strings/str_cat.h"

namespace kiln::data {
namespace {

// SplitMix64's finaliser: a strong 64-bit mixer for the Feistel rounds.
uint64_t Mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

constexpr int kRounds = 4;

}  // namespace

absl::StatusOr<WindowSampler> WindowSampler::Create(int64_t tokens, int64_t context, uint64_t seed) {
  if (context < 1 || tokens < context + 1) {
    return absl::InvalidArgumentError(absl::StrCat(tokens, " tokens are too few for windows of --context=", context,
                                                   " (", context + 1, " tokens each)"));
  }
  const int64_t windows = (tokens - 1) / context;
  int half_bits = 1;  // the permuted domain, 4^half_bits, is the least even power of two >= windows
  while ((int64_t{1} << (2 * half_bits)) < windows) ++half_bits;
  return WindowSampler(windows, context, seed, half_bits);
}

// A balanced Feistel network over 2 * half_bits bits: a bijection for any round function.
uint64_t WindowSampler::Permute(uint64_t key, uint64_t index) const {
  const uint64_t mask = (uint64_t{1} << half_bits_) - 1;
  uint64_t left = index >> half_bits_, right = index & mask;
  for (int round = 0; round < kRounds; ++round) {
    const uint64_t next = left ^ (Mix(key + Mix(right + static_cast<uint64_t>(round) * 0x9E3779B97F4A7C15ull)) & mask);
    left = right;
    right = next;
  }
  return left << half_bits_ | right;
}

int64_t WindowSampler::Start(int64_t epoch, int64_t k) const {
  const uint64_t key = Mix(seed_ ^ Mix(static_cast<uint64_t>(epoch) + 1));
  // Cycle walking: a permutation of the larger domain, applied until it lands in [0, windows),
  // is a permutation of [0, windows) (the domain is under 4x larger, so few steps are needed).
  uint64_t w = static_cast<uint64_t>(k);
  do {
    w = Permute(key, w);
  } while (w >= static_cast<uint64_t>(windows_));
  return static_cast<int64_t>(w) * context_;
}

std::vector<int64_t> WindowSampler::Next(int64_t count, SamplerPosition& at) const {
  std::vector<int64_t> starts;
  starts.reserve(count);
  for (int64_t i = 0; i < count; ++i) {
    if (at.drawn == windows_) at = {.epoch = at.epoch + 1, .drawn = 0};
    starts.push_back(Start(at.epoch, at.drawn++));
  }
  return starts;
}

SamplerPosition WindowSampler::After(int64_t steps, int64_t count) const {
  const int64_t drawn = steps * count;  // both checked by the caller to keep this far from overflow
  if (drawn == 0) return {};
  // A finished epoch is left as drawn == windows until the next draw moves on, as Next does.
  return {.epoch = (drawn - 1) / windows_, .drawn = (drawn - 1) % windows_ + 1};
}

std::pair<int64_t, int64_t> MemberRows(int64_t count, int g, int n) { return {count * g / n, count * (g + 1) / n}; }

}  // namespace kiln::data
