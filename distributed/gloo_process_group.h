// GlooProcessGroup: a ProcessGroup over Gloo's TCP transport (Debian's libgloo). Ranks meet
// at a rendezvous store (gloo_store.h), connect a full mesh, and run on host buffers: Gloo's
// halving-doubling all-reduce class for small payloads (its buffers registered with the
// connections once per size, which saves the round trips a fresh setup spends on every call),
// a direct all-reduce of kiln's own on Gloo's transport for larger ones (each rank reduces its
// part and streams it to the others; it reads a separate input in place, so a kept input costs
// no copy), binomial-tree broadcast, ring all-gather and halving-doubling reduce-scatter. Every
// operation, the rendezvous included, has a deadline (`timeout`), so a rank that died or
// became unreachable gives the others DeadlineExceeded or Unavailable naming the ranks,
// never a hang.
#ifndef KILN_DISTRIBUTED_GLOO_PROCESS_GROUP_H_
#define KILN_DISTRIBUTED_GLOO_PROCESS_GROUP_H_

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/launch_env.h"
#include "distributed/process_group.h"

namespace gloo {
class Algorithm;
class Context;
namespace transport {
class Buffer;
}  // namespace transport
}  // namespace gloo

namespace kiln::distributed {

struct ProcessGroupOptions {
  int rank = 0;
  int world_size = 1;
  std::string rendezvous;  // file:///shared/dir or redis://host:port
  std::string run_id;      // keys of this run in the store (empty: a shared default)
  std::string host;        // address to listen on (empty: this machine's hostname)
  // The deadline of the rendezvous and of every collective.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};

  static ProcessGroupOptions From(const LaunchEnv& env, std::chrono::milliseconds timeout);
};

class GlooProcessGroup : public ProcessGroup {
 public:
  // Joins the run: InvalidArgument for a world size below 1, a rank out of range or a bad
  // address; the store's errors (gloo_store.h); DeadlineExceeded naming the ranks that did
  // not join within the timeout; FailedPrecondition when this rank's key is already in the
  // store (a duplicate rank, or an earlier run with the same store and run id).
  static absl::StatusOr<std::shared_ptr<GlooProcessGroup>> Connect(const ProcessGroupOptions& options);

  // Waits (at most the timeout) for the other ranks to close theirs too, unless the group is
  // broken, so that no rank closes its connections while a message to another is in flight.
  ~GlooProcessGroup() override;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  const char* engine() const override { return "gloo"; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  absl::Status Agree(absl::string_view call) override;
  absl::Status AllReduce(absl::string_view call, const void* in, void* out, int64_t count, DType dtype,
                         ReduceKind kind) override;
  absl::Status Broadcast(absl::string_view call, void* data, int64_t bytes, int root) override;
  absl::Status AllGather(absl::string_view call, void* data, int64_t bytes_per_rank) override;
  absl::Status ReduceScatter(absl::string_view call, void* data, int64_t count, DType dtype,
                             ReduceKind kind) override;

  // Gloo's context, for benchmarks that time raw Gloo on the same connections.
  const std::shared_ptr<gloo::Context>& context() const { return context_; }

 private:
  GlooProcessGroup(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<gloo::Context> context);

  // All-reduces up to this many bytes go through a cached halving-doubling instance.
  static constexpr int64_t kSmallBytes = int64_t{256} << 10;
  absl::Status SmallAllReduce(const void* in, void* out, int64_t count, DType dtype, ReduceKind kind);
  // Larger ones: each rank reduces its part and sends it on segment by segment (see the .cc).
  // The segments in flight towards a rank at once (two per sender) are at most 2 * this much.
  static constexpr int64_t kSegmentBytes = int64_t{1} << 20;
  void DirectAllReduce(const void* in, void* out, int64_t count, DType dtype, ReduceKind kind);

  // Runs one Gloo operation: exceptions become a status that breaks the group for good.
  template <class F>
  absl::Status Run(absl::string_view what, F&& op);
  std::string OtherRanks() const;
  // Agree's work (mu_ held).
  absl::Status AgreeLocked(absl::string_view call);
  // The call being made (for messages), or `op`.
  std::string Called(absl::string_view op) const;

  const int rank_, size_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  std::mutex mu_;  // one collective at a time: Gloo's context is not for concurrent use
  absl::Status broken_;
  std::string called_;
  // Agree: each rank writes its call's hash straight into a buffer every other rank registered
  // with their connection once (one message each way, no notifications). Two places per rank,
  // used by turns: a rank can be at most one call ahead of another (it needs the other's hash
  // of its previous call to get past it), so it never overwrites a hash not yet read.
  uint64_t agree_calls_ = 0;
  std::array<uint64_t, 2> agree_mine_{};
  std::vector<std::array<uint64_t, 2>> agree_theirs_;  // by rank
  std::vector<std::unique_ptr<gloo::transport::Buffer>> agree_send_, agree_recv_;  // by rank, none for this one
  // DirectAllReduce: Gloo slots of its two phases, and room for two segments from each rank.
  uint64_t scatter_slot_ = 0, gather_slot_ = 0;
  std::vector<char> segments_;
  // Small all-reduces: an instance and its buffer per (elements, dtype, kind). Made in call
  // order, which every rank shares (Agree checks it), so Gloo's slots match across ranks.
  struct Small {
    std::vector<char> buffer;
    std::unique_ptr<gloo::Algorithm> algorithm;
  };
  std::map<std::tuple<int64_t, DType, ReduceKind>, Small> small_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GLOO_PROCESS_GROUP_H_
