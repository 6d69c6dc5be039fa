// GlooProcessGroup: a ProcessGroup over Gloo's TCP transport (Debian's libgloo). Ranks meet
// at a rendezvous store (gloo_store.h), connect a full mesh, and run on host buffers: an
// all-reduce and a reduce-scatter of kiln's own on Gloo's transport (each rank reduces its part
// and streams it to the others; a separate input is read in place, so a kept input costs no
// copy; the first segments travel with the agreement on the call), Gloo's binomial-tree
// broadcast and ring all-gather. Every operation, the rendezvous included, has a deadline
// (`timeout`), so a rank that died or became unreachable gives the others DeadlineExceeded or
// Unavailable naming the ranks, never a hang.
#ifndef KILN_DISTRIBUTED_GLOO_PROCESS_GROUP_H_
#define KILN_DISTRIBUTED_GLOO_PROCESS_GROUP_H_

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "distributed/launch_env.h"
#include "distributed/process_group.h"

namespace gloo {
class Context;
namespace transport {
class UnboundBuffer;
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

  // All-reduce and reduce-scatter: each rank reduces its part, segment by segment (see the
  // .cc), agreeing on the call while its first segments are already on their way. The segments
  // in flight towards a rank at once (kWindow per sender) are at most kWindow * this much.
  static constexpr int64_t kSegmentBytes = int64_t{1} << 20;
  static constexpr int kWindow = 2;
  absl::Status Direct(absl::string_view call, const void* in, void* out, int64_t count, DType dtype, ReduceKind kind,
                      bool gather);
  // Waits for the next segment from `rank` in its scratch window and returns where it is; Free
  // gives that place back (a receive for a later segment is posted at once).
  const char* NextSegment(int rank);
  void FreeSegment(int rank);

  // Runs one Gloo operation: exceptions become a status that breaks the group for good and
  // close its connections (the peers learn at once, and Gloo's event loop no longer touches
  // the receives this rank leaves posted).
  template <class F>
  absl::Status Run(absl::string_view what, F&& op);
  std::string OtherRanks() const;
  void CloseConnections();
  // Agree's work (mu_ held). `early[r]` segments of this call's data go to rank r into its
  // scratch window before r's answer is in; `send_early` sends them (after this rank's claim,
  // so that a peer reads the claim first). When the ranks disagree, each takes in and drops
  // the early segments sent to it, so the windows stay in step for the next call.
  absl::Status AgreeLocked(absl::string_view call, const std::vector<int64_t>& early = {},
                           const std::function<void()>& send_early = {});
  // The call being made (for messages), or `op`.
  std::string Called(absl::string_view op) const;

  const int rank_, size_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  std::mutex mu_;  // one collective at a time: Gloo's context is not for concurrent use
  absl::Status broken_;
  std::string called_;
  // Agree: each rank sends every other its claim (its call's hash, and how many segments it
  // sends that rank early) into one of kWindow places the other keeps a receive posted in, by
  // turns, so a claim leaves at once, with no notification to wait for. (Only Gloo's
  // unbound buffers are used: its registered buffers fix a socket's send buffer at the size of
  // the first message, here a few bytes, and every large transfer then waits for acks.)
  struct Claim {
    uint64_t hash = 0;
    uint64_t early = 0;
  };
  uint64_t agree_calls_ = 0;
  uint64_t agree_slot_ = 0;
  std::vector<std::array<Claim, kWindow>> agree_mine_, agree_theirs_;                   // by rank
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> agree_out_, agree_in_;  // by rank, none for this one
  // Direct: Gloo slots of its two phases, and each other rank's scratch window:
  // kWindow places of `slot_bytes_`, with a receive always posted in each that is free, so a
  // peer's first segments of a call leave at once, before the ranks have agreed on it.
  // `received_[r]` counts the segments taken from rank r; the next lies at place received_ % kWindow.
  uint64_t scatter_slot_ = 0, gather_slot_ = 0;
  int64_t slot_bytes_ = 0;
  std::vector<char> segments_;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> scratch_;  // by rank
  std::vector<uint64_t> received_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GLOO_PROCESS_GROUP_H_
