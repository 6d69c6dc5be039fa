// Which parameters' gradients travel together (GradientSync's buckets), in the order they are
// reduced. Parameters are taken in reverse order, as backward finishes their gradients, and
// fill buckets of up to bucket_bytes. Sharded, a bucket travels packed member-major
// (shard_layout.h): a copy of every gradient in it on the way out, and a copy of every
// parameter on the way back (its gathered rows are strided). A bucket of one parameter needs
// neither: its packed form and its gathered form are views of the parameter itself. So,
// sharded, a parameter of at least SoloBucketBytes travels alone (a collective of its own costs
// less than copying it twice), and the small ones between the large ones still share buckets;
// buckets are then ordered by when their last gradient arrives, so none waits behind a later one.
#ifndef KILN_DISTRIBUTED_BUCKET_PLAN_H_
#define KILN_DISTRIBUTED_BUCKET_PLAN_H_

#include <algorithm>
#include <cstdint>
#include <vector>

namespace kiln::distributed {

// The size from which a sharded parameter gets a bucket of its own: 1/16 of a bucket (256 KiB
// of the sharded default's 4 MiB), at least one byte.
inline int64_t SoloBucketBytes(int64_t bucket_bytes) { return std::max<int64_t>(1, bucket_bytes / 16); }

// Buckets of parameter indices (each in reverse parameter order), in reduction order, for
// parameters of `bytes[i]` bytes each. `solo_large`: large parameters travel alone (sharded).
inline std::vector<std::vector<int>> PlanBuckets(const std::vector<int64_t>& bytes, int64_t bucket_bytes,
                                                 bool solo_large) {
  std::vector<std::vector<int>> buckets;
  std::vector<int> open;
  int64_t open_bytes = 0;
  for (int i = static_cast<int>(bytes.size()) - 1; i >= 0; --i) {
    if (solo_large && bytes[i] >= SoloBucketBytes(bucket_bytes)) {
      buckets.push_back({i});
      continue;
    }
    if (!open.empty() && open_bytes + bytes[i] > bucket_bytes) {
      buckets.push_back(std::move(open));
      open.clear();
      open_bytes = 0;
    }
    open.push_back(i);
    open_bytes += bytes[i];
  }
  if (!open.empty()) buckets.push_back(std::move(open));
  // A bucket is ready once its lowest-indexed parameter (the last backward finishes) is.
  std::stable_sort(buckets.begin(), buckets.end(),
                   [](const std::vector<int>& a, const std::vector<int>& b) { return a.back() > b.back(); });
  return buckets;
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_BUCKET_PLAN_H_
