// GlooProcessGroup: a ProcessGroup over Gloo's TCP transport (Debian's libgloo). Ranks meet
// at a rendezvous store (distributed/process/rendezvous_store.h), connect an authenticated
// full mesh (mesh.h), and run on host buffers: an all-reduce and a reduce-scatter of kiln's
// own on Gloo's registered buffers (direct_reduce.cc: each rank reduces its part and streams
// it to the others; a separate input is read in place, so a kept input costs no copy; the
// first segments travel with the agreement on the call, agreement.cc), Gloo's binomial-tree
// broadcast and ring all-gather. Every operation, the rendezvous included, has a deadline
// (`timeout`), so a rank that died or became unreachable gives the others DeadlineExceeded or
// Unavailable naming the ranks (errors.h), never a hang.
#ifndef KILN_DISTRIBUTED_GLOO_GLOO_PROCESS_GROUP_H_
#define KILN_DISTRIBUTED_GLOO_GLOO_PROCESS_GROUP_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "distributed/process/launch_env.h"
#include "distributed/process/process_group.h"

namespace gloo {
class Context;
}  // namespace gloo

namespace kiln::distributed {

class Mailbox;
class RendezvousStore;

struct ProcessGroupOptions {
  int rank = 0;
  int world_size = 1;
  std::string rendezvous;  // file:///shared/dir or redis://host:port
  std::string run_id;      // keys of this run in the store (empty: a shared default)
  std::string host;        // address to listen on (empty: this machine's hostname)
  // The run's secret, which every connection proves (mesh.h); empty: derived from the run id
  // and the rendezvous address (distributed/process/run_token.h says what that does and does
  // not keep out).
  std::string run_token;
  // The deadline of the rendezvous and of every collective.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};

  static ProcessGroupOptions From(const LaunchEnv& env, std::chrono::milliseconds timeout);
};

class GlooProcessGroup : public ProcessGroup {
 public:
  // Every rank holds a connection to every other: beyond this, a full mesh is no design.
  static constexpr int kMaxWorldSize = 65536;

  // Joins the run: InvalidArgument for a world size below 1, a rank out of range or a bad
  // address; the store's errors (distributed/process/rendezvous_store.h); DeadlineExceeded
  // naming the ranks that did not join within the timeout; FailedPrecondition when this rank's
  // key is already in the store (a duplicate rank, or an earlier run with the same store and
  // run id).
  static absl::StatusOr<std::shared_ptr<GlooProcessGroup>> Connect(const ProcessGroupOptions& options);

  // Waits (at most the timeout) for the other ranks to close theirs too, unless the group is
  // broken, so that no rank closes its connections while a message to another is in flight.
  ~GlooProcessGroup() override;

  int rank() const override { return rank_; }
  int world_size() const override { return size_; }
  const char* engine() const override { return "gloo"; }
  std::chrono::milliseconds timeout() const override { return timeout_; }

  absl::Status Agree(absl::string_view call) override;  // agreement.cc
  absl::Status AllReduce(absl::string_view call, const void* in, void* out, int64_t count, DType dtype,
                         ReduceOp kind) override;  // direct_reduce.cc
  absl::Status Broadcast(absl::string_view call, void* data, int64_t bytes, int root) override;
  absl::Status AllGather(absl::string_view call, void* data, int64_t bytes_per_rank) override;
  absl::Status ReduceScatter(absl::string_view call, void* data, int64_t count, DType dtype,
                             ReduceOp kind) override;  // direct_reduce.cc
  // Through the rendezvous store, under this run's keys (notes.cc).
  std::vector<std::optional<std::string>> ExchangeNotes(const std::string& key, const std::string& note,
                                                        std::chrono::milliseconds wait) override;

  // Gloo's context, for benchmarks that time raw Gloo on the same connections (unusable once
  // the group has failed: its connections are closed).
  const std::shared_ptr<gloo::Context>& context() const { return context_; }

 private:
  GlooProcessGroup(int rank, int size, std::chrono::milliseconds timeout, std::shared_ptr<gloo::Context> context,
                   std::shared_ptr<RendezvousStore> store);

  // All-reduce and reduce-scatter (direct_reduce.cc): each rank reduces its part, segment by
  // segment, through the mailbox, agreeing on the call while its first segments are already
  // on their way.
  absl::Status Direct(absl::string_view call, const void* in, void* out, int64_t count, DType dtype, ReduceOp kind,
                      bool gather);
  // One call of Direct: its split into parts and segments, its buffers, its steps.
  class DirectCall;

  // Runs one Gloo operation: exceptions become a status that breaks the group for good and
  // close its connections (the peers learn at once, and Gloo's event loop no longer writes
  // into this rank's buffers).
  absl::Status Run(absl::string_view what, absl::FunctionRef<void()> op);
  void CloseConnections();
  // Agree's work (agreement.cc; mu_ held): the ranks must agree on the call's signature and on
  // the `operation` it makes (which, of how many elements of what). `early[r]` segments of
  // this call's data go to rank r into its window before r's answer is in; `send_early` sends
  // them (after this rank's claim, so that a peer reads the claim first). When the ranks
  // disagree, each takes in and drops the early segments sent to it, so the windows stay in
  // step for the next call. `closing`: the last agreement, whose places are not handed back.
  absl::Status AgreeLocked(absl::string_view call, absl::string_view operation, const std::vector<int64_t>& early = {},
                           const std::function<void()>& send_early = {}, bool closing = false);
  // The call being made (for messages), or `op`.
  std::string Called(absl::string_view op) const;

  const int rank_, size_;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<gloo::Context> context_;
  const std::shared_ptr<RendezvousStore> store_;  // kept for ExchangeNotes
  std::mutex notes_mu_;                           // the store is not for concurrent use
  std::mutex mu_;                                 // one collective at a time: Gloo's context is not for concurrent use
  absl::Status broken_;
  std::string called_;
  std::unique_ptr<Mailbox> mailbox_;  // null in a world of one
  // The Gloo slot of Direct's results, sent straight into each peer's output: a rank receives
  // on result_slot_ + its rank and sends on result_slot_ + the receiver's.
  uint64_t result_slot_ = 0;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GLOO_GLOO_PROCESS_GROUP_H_
