#include "distributed/gloo/gloo_process_group.h"

#include <signal.h>

#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distributed/gloo/errors.h"
#include "distributed/gloo/mailbox.h"
#include "distributed/gloo/mesh.h"
#include "distributed/process/rank_list.h"
#include "distributed/process/rendezvous_store.h"
#include "distributed/process/run_token.h"
#include "distributed/timeout.h"
#include "gloo/allgather.h"
#include "gloo/broadcast.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/tcp/device.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// A peer that dies while this rank sends to it must give this rank an error status (EPIPE),
// not kill it with SIGPIPE, which is what a write to a closed socket does by default. A
// handler the program installed itself is left alone.
void IgnoreBrokenPipes() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

// Each rank writes its key, then waits for everyone's, so a timeout names the absent.
// `where` names the rendezvous in messages.
absl::Status Join(RendezvousStore& store, const ProcessGroupOptions& o, const std::string& where) {
  try {
    store.Set(absl::StrCat("joined/", o.rank), {'1'});
  } catch (const std::exception& e) {
    const std::string why = Reason(e);
    if (absl::StrContains(why, "already")) {
      return absl::FailedPreconditionError(absl::StrCat(
          where, ": rank ", o.rank, " has already joined this run; either two processes have rank ", o.rank,
          " or an earlier run used this store with the same run id (give each run a fresh directory or "
          "KILN_RUN_ID)"));
    }
    return absl::UnavailableError(absl::StrCat(where, ": cannot write rank ", o.rank, "'s key: ", why));
  }
  // Absent ranks are asked about again until all have joined; the deadline is checked after
  // every question, so a huge world size cannot stretch one pass past it.
  const auto deadline = Clock::now() + o.timeout;
  std::vector<int> missing;
  for (int r = 0; r < o.world_size; ++r) missing.push_back(r);
  while (!missing.empty()) {
    std::vector<int> still;
    try {
      for (size_t i = 0; i < missing.size(); ++i) {
        if (Clock::now() > deadline) {
          still.insert(still.end(), missing.begin() + i, missing.end());
          break;
        }
        if (!store.Has(absl::StrCat("joined/", missing[i]))) still.push_back(missing[i]);
      }
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(where, ": the store failed: ", Reason(e)));
    }
    missing = std::move(still);
    if (missing.empty()) break;
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(where, " timed out after ", o.timeout.count(), " ms: rank(s) ", RankList(missing), " of ",
                       o.world_size, " did not join (this is rank ", o.rank,
                       "); start every rank with the same rendezvous address, run id and world size"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return absl::OkStatus();
}

}  // namespace

ProcessGroupOptions ProcessGroupOptions::From(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  return {.rank = env.rank,
          .world_size = env.world_size,
          .rendezvous = env.rendezvous,
          .run_id = env.run_id,
          .host = env.host,
          .run_token = env.run_token,
          .timeout = timeout};
}

absl::StatusOr<std::shared_ptr<GlooProcessGroup>> GlooProcessGroup::Connect(const ProcessGroupOptions& o) {
  if (o.world_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("process group: world size ", o.world_size, " is invalid; it must be at least 1"));
  }
  if (o.world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("process group: world size ", o.world_size, " is more than ", kMaxWorldSize, " ranks"));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("process group: rank ", o.rank, " is out of range for world size ",
                                                   o.world_size, " (ranks are 0..", o.world_size - 1, ")"));
  }
  if (absl::Status s = CheckTimeout(o.timeout, "process group"); !s.ok()) return s;
  IgnoreBrokenPipes();
  absl::StatusOr<std::shared_ptr<RendezvousStore>> store = RendezvousStore::Open(o.rendezvous, o.run_id);
  if (!store.ok()) return store.status();
  const std::string where =
      absl::StrCat("rendezvous at ", o.rendezvous, o.run_id.empty() ? "" : absl::StrCat(" (run ", o.run_id, ")"));
  if (absl::Status s = Join(**store, o, where); !s.ok()) return s;

  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.host;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("process group rank ", o.rank, ": cannot listen on '",
                                                   o.host.empty() ? "this machine's hostname" : o.host,
                                                   "': ", Reason(e), " (set KILN_HOST to an address of this machine)"));
  }
  std::shared_ptr<gloo::Context> context;
  try {
    context = ConnectMesh(**store, device,
                          {.rank = o.rank,
                           .world_size = o.world_size,
                           .timeout = o.timeout,
                           .token = o.run_token.empty() ? DefaultRunToken(o.run_id, o.rendezvous) : o.run_token});
  } catch (const std::exception& e) {
    const std::string why = Reason(e);
    return ConnectionError(why, absl::StrCat(where, ": rank ", o.rank, " could not connect to the others: ", why));
  }
  try {  // the first messages (sizing the send buffers) can meet a peer that died since
    return std::shared_ptr<GlooProcessGroup>(new GlooProcessGroup(o.rank, o.world_size, o.timeout, context, *store));
  } catch (const std::exception& e) {
    const std::string why = Reason(e);
    return ConnectionError(why,
                           absl::StrCat(where, ": rank ", o.rank, " lost the others right after connecting: ", why));
  }
}

GlooProcessGroup::GlooProcessGroup(int rank, int size, std::chrono::milliseconds timeout,
                                   std::shared_ptr<gloo::Context> context, std::shared_ptr<RendezvousStore> store)
    : rank_(rank), size_(size), timeout_(timeout), context_(std::move(context)), store_(std::move(store)) {
  if (size_ == 1) return;
  // Every rank takes its slots in the same order, so they match across ranks: the mailbox's
  // two, the results', then the one that sizes the send buffers.
  mailbox_ = std::make_unique<Mailbox>(*context_, rank_, size_);
  result_slot_ = context_->nextSlot(size_);
  try {
    mailbox_->SizeSendBuffers();
  } catch (...) {
    CloseConnections();  // before the buffers go, so that Gloo's event loop writes into none
    throw;
  }
}

GlooProcessGroup::~GlooProcessGroup() {
  // A collective can return while the credits it sent are still in this process's send queue,
  // which closing the connections would drop, and a peer may still be reading its last
  // messages. So the ranks meet once more (each rank's closing claim comes after everything
  // it sent before), and only then do the buffers go. A broken group has closed its
  // connections already. Best effort: a peer that closed first can make this meeting fail
  // (Gloo reports a closed connection before a message already in), which closes ours too.
  std::lock_guard lock(mu_);
  if (size_ == 1 || !broken_.ok()) return;
  if (!AgreeLocked("closing the process group", "closing", {}, {}, /*closing=*/true).ok()) CloseConnections();
}

void GlooProcessGroup::CloseConnections() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    try {
      context_->getPair(r)->close();
    } catch (const std::exception&) {
      // Already broken; closing is all that was asked.
    }
  }
}

std::string GlooProcessGroup::Called(absl::string_view op) const { return called_.empty() ? std::string(op) : called_; }

absl::Status GlooProcessGroup::Run(absl::string_view what, absl::FunctionRef<void()> op) {
  if (!broken_.ok()) return broken_;
  std::string why;
  try {
    op();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    why = Reason(e);
  }
  broken_ = BrokenGroupError(rank_, size_, what, timeout_, why);
  CloseConnections();
  return broken_;
}

absl::Status GlooProcessGroup::Broadcast(absl::string_view call, void* data, int64_t bytes, int root) {
  std::lock_guard lock(mu_);
  if (absl::Status s = AgreeLocked(call, absl::StrCat("broadcast of ", bytes, " bytes from rank ", root)); !s.ok()) {
    return s;
  }
  if (root < 0 || root >= size_) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast: root rank ", root, " is not in a world of ", size_));
  }
  if (bytes == 0) return broken_;
  return Run(Called("broadcast"), [&] {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<char*>(data), bytes);
    opts.setRoot(root);
    opts.setTimeout(timeout_);
    gloo::broadcast(opts);
  });
}

absl::Status GlooProcessGroup::AllGather(absl::string_view call, void* data, int64_t bytes_per_rank) {
  std::lock_guard lock(mu_);
  if (absl::Status s = AgreeLocked(call, absl::StrCat("all_gather of ", bytes_per_rank, " bytes per rank")); !s.ok()) {
    return s;
  }
  if (bytes_per_rank == 0) return broken_;
  return Run(Called("all_gather"), [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setOutput(static_cast<char*>(data), bytes_per_rank * size_);
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
}

}  // namespace kiln::distributed
