// The shard layout every sharded stage and sharded checkpoint uses: per parameter (and per
// optimizer slot), the tensor flattened row-major and split over N members into chunks of
// c = ceil(n / N) elements; member g holds elements [g*c, min((g+1)*c, n)) followed by zeros
// up to c. So N > n works: the last members hold padding only.
#ifndef KILN_NN_SHARD_LAYOUT_H_
#define KILN_NN_SHARD_LAYOUT_H_

#include <algorithm>
#include <cstdint>

namespace kiln::nn {

// The most members a layout may have: a bound that keeps every product below in int64.
inline constexpr int64_t kMaxShardMembers = int64_t{1} << 20;

// c = ceil(n / world) elements per member (0 for an empty tensor).
inline int64_t ShardChunkSize(int64_t numel, int64_t world) { return numel / world + (numel % world != 0); }

// The elements of the whole tensor that member `member` holds: [begin, end), end - begin <= c.
struct ShardRange {
  int64_t begin;
  int64_t end;
};
inline ShardRange ShardRangeOf(int64_t numel, int64_t world, int64_t member) {
  const int64_t c = ShardChunkSize(numel, world);
  // c * member <= numel + world - 1 stays in int64 for numel < 2^63 - 2^20.
  return {std::min(c * member, numel), std::min(c * member + c, numel)};
}

}  // namespace kiln::nn

#endif  // KILN_NN_SHARD_LAYOUT_H_
