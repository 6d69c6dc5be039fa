#include "distributed/gloo/gloo_process_group.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/collective_kernels.h"
#include "distributed/gloo/mesh.h"
#include "distributed/process/fnv1a.h"
#include "distributed/process/rank_list.h"
#include "distributed/process/rendezvous_store.h"
#include "distributed/process/run_token.h"
#include "distributed/timeout.h"
#include "gloo/allgather.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/transport/buffer.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/tcp/device.h"

namespace kiln::distributed {
namespace {

using Clock = std::chrono::steady_clock;

// Gloo prefixes its messages with "[file:line] "; the reason is what follows.
std::string Reason(const std::exception& e) {
  std::string s = e.what();
  while (!s.empty() && s[0] == '[') {
    const size_t end = s.find("] ");
    if (end == std::string::npos) break;
    s = s.substr(end + 2);
  }
  return s;
}

bool IsTimeout(const std::string& reason) {
  return absl::StrContains(reason, "imeout") || absl::StrContains(reason, "imed out");
}

// Signatures travel as a hash first (8 bytes per rank); only when hashes differ do the full
// strings follow, cut to this many bytes, to say who called what.
constexpr size_t kSignatureBytes = 240;
// The operation a call makes (which, how many elements of what), compared with the call's
// signature: a caller's signature may not say it.
constexpr size_t kOperationBytes = 96;

absl::Status CheckReducible(const char* what, DType dtype, ReduceOp kind) {
  if (dtype == DType::kBool) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " of bool across processes is not supported; convert with .to(DType::kI32)"));
  }
  if (kind == ReduceOp::kMean) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a process group sums; the caller divides for a mean"));
  }
  return absl::OkStatus();
}

std::string Operation(const char* what, int64_t count, DType dtype, ReduceOp kind) {
  return absl::StrCat(what, "(", OpName(kind), ") of ", count, " ", DTypeName(dtype));
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

namespace {

// A peer that dies while this rank sends to it must give this rank an error status (EPIPE),
// not kill it with SIGPIPE, which is what a write to a closed socket does by default. A
// handler the program installed itself is left alone.
void IgnoreBrokenPipes() {
  struct sigaction current {};
  if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
    signal(SIGPIPE, SIG_IGN);
  }
}

}  // namespace

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
  auto store = RendezvousStore::Open(o.rendezvous, o.run_id);
  if (!store.ok()) return store.status();
  const std::string where =
      absl::StrCat("rendezvous at ", o.rendezvous, o.run_id.empty() ? "" : absl::StrCat(" (run ", o.run_id, ")"));
  // Join: each rank writes its key, then waits for everyone's, so a timeout names the absent.
  try {
    (*store)->set(absl::StrCat("joined/", o.rank), {'1'});
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
        if (!(*store)->Has(absl::StrCat("joined/", missing[i]))) still.push_back(missing[i]);
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
    const std::string msg = absl::StrCat(where, ": rank ", o.rank, " could not connect to the others: ", why);
    return IsTimeout(why) ? absl::DeadlineExceededError(msg) : absl::UnavailableError(msg);
  }
  try {  // the first messages (sizing the send buffers) can meet a peer that died since
    return std::shared_ptr<GlooProcessGroup>(new GlooProcessGroup(o.rank, o.world_size, o.timeout, context));
  } catch (const std::exception& e) {
    const std::string why = Reason(e);
    const std::string msg = absl::StrCat(where, ": rank ", o.rank, " lost the others right after connecting: ", why);
    return IsTimeout(why) ? absl::DeadlineExceededError(msg) : absl::UnavailableError(msg);
  }
}

GlooProcessGroup::GlooProcessGroup(int rank, int size, std::chrono::milliseconds timeout,
                                   std::shared_ptr<gloo::Context> context)
    : rank_(rank), size_(size), timeout_(timeout), context_(std::move(context)) {
  if (size_ == 1) return;
  // Every rank takes its slots in the same order, so they match across ranks.
  window_slot_ = context_->nextSlot(size_);
  credit_slot_ = context_->nextSlot(size_);
  result_slot_ = context_->nextSlot(size_);
  segment_bytes_ = kSegmentBytes / (size_ - 1) / kHeaderBytes * kHeaderBytes;
  windows_.resize(size_ * kWindow * PlaceBytes());
  claims_.resize(size_);
  credit_mem_.assign(2 * size_, 0);
  window_in_.resize(size_);
  claim_out_.resize(size_);
  credit_in_.resize(size_);
  credit_out_.resize(size_);
  used_.assign(size_, 0);
  credits_.assign(size_, 0);
  read_.assign(size_, 0);
  control_sends_.assign(size_, 0);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto& pair = context_->getPair(r);
    window_in_[r] = pair->createRecvBuffer(window_slot_ + rank_, windows_.data() + r * kWindow * PlaceBytes(),
                                           kWindow * PlaceBytes());
    claim_out_[r] = pair->createSendBuffer(window_slot_ + r, claims_[r].data(), kHeaderBytes);
    credit_in_[r] = pair->createRecvBuffer(credit_slot_ + rank_, &credit_mem_[2 * r], sizeof(uint64_t));
    credit_out_[r] = pair->createSendBuffer(credit_slot_ + r, &credit_mem_[2 * r + 1], sizeof(uint64_t));
  }
  try {
    SizeSendBuffers();
  } catch (...) {
    CloseConnections();  // before the buffers go, so that Gloo's event loop writes into none
    throw;
  }
}

// Gloo sets a connection's SO_SNDBUF to the largest message sent through a registered buffer
// so far (which ends the kernel's autotuning of it), and unbound sends never raise it. Left to
// the first claim (64 bytes), every socket would stay at the kernel's minimum, ~4.6 KiB, and
// a large broadcast or all-gather (Gloo's algorithms, on unbound buffers), made before any
// all-reduce has sent a segment, would wait on delayed acks: 16 MiB took ~10 s. So each rank
// first sends every other one message of kSegmentBytes (the kernel doubles it, within
// net.core.wmem_max), into a buffer kept for just that.
void GlooProcessGroup::SizeSendBuffers() {
  std::vector<char> out(kSegmentBytes), in(kSegmentBytes);  // `in` takes every peer's, in turn
  std::vector<std::unique_ptr<gloo::transport::Buffer>> sends(size_), receives(size_);
  const uint64_t slot = context_->nextSlot(size_);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) receives[r] = context_->getPair(r)->createRecvBuffer(slot + rank_, in.data(), in.size());
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    sends[r] = context_->getPair(r)->createSendBuffer(slot + r, out.data(), out.size());
    sends[r]->send(0, out.size(), 0);
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    receives[r]->waitRecv();
    sends[r]->waitSend();
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

std::string GlooProcessGroup::OtherRanks() const {
  std::vector<int> others;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) others.push_back(r);
  }
  return RankList(others);
}

template <class F>
absl::Status GlooProcessGroup::Run(absl::string_view what, F&& op) {
  if (!broken_.ok()) return broken_;
  std::string why;
  try {
    op();
    return absl::OkStatus();
  } catch (const std::exception& e) {
    why = Reason(e);
  }
  const std::string head = absl::StrCat("process group (gloo, rank ", rank_, " of ", size_, "): ", what);
  const std::string tail = "; the process group is unusable from now on";
  if (IsTimeout(why)) {
    broken_ = absl::DeadlineExceededError(absl::StrCat(head, " got no answer from rank(s) ", OtherRanks(), " within ",
                                                       timeout_.count(), " ms (", why, ")", tail));
  } else {
    broken_ = absl::UnavailableError(
        absl::StrCat(head, " lost its connection to rank(s) ", OtherRanks(), " (", why, ")", tail));
  }
  CloseConnections();
  return broken_;
}

absl::Status GlooProcessGroup::Agree(absl::string_view call) {
  std::lock_guard lock(mu_);
  return AgreeLocked(call, "an agreement");
}

int64_t GlooProcessGroup::AcquirePlace(int rank) {
  while (used_[rank] - credits_[rank] >= kWindow) {
    credit_in_[rank]->waitRecv();
    ++credits_[rank];
  }
  return static_cast<int64_t>(used_[rank]++ % kWindow) * PlaceBytes();
}

const char* GlooProcessGroup::NextMessage(int rank) {
  window_in_[rank]->waitRecv();
  return windows_.data() + (rank * kWindow + static_cast<int64_t>(read_[rank] % kWindow)) * PlaceBytes();
}

void GlooProcessGroup::Release(int rank, bool credit) {
  ++read_[rank];
  if (!credit) return;
  credit_out_[rank]->send(0, sizeof(uint64_t), 0);
  ++control_sends_[rank];
}

void GlooProcessGroup::WaitControlSends() {
  for (int r = 0; r < size_; ++r) {
    for (; r != rank_ && control_sends_[r] > 0; --control_sends_[r]) credit_out_[r]->waitSend();
  }
}

absl::Status GlooProcessGroup::AgreeLocked(absl::string_view signature, absl::string_view operation,
                                           const std::vector<int64_t>& early, const std::function<void()>& send_early,
                                           bool closing) {
  called_ = std::string(signature);
  if (!broken_.ok() || size_ == 1) return broken_;
  const uint64_t mine = Fnv1a(absl::StrCat(signature, "\n", operation));
  std::vector<Claim> theirs(size_, Claim{mine, 0});
  const std::string what = absl::StrCat("agreeing on ", signature);
  // Every rank gets every hash, so all see the same mismatch, if any. A claim opens a place
  // in the receiver's window; the call's first segment, if any, fills the rest of it.
  absl::Status s = Run(what, [&] {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      const Claim claim{mine, early.empty() ? 0 : static_cast<uint64_t>(early[r])};
      std::memcpy(claims_[r].data(), &claim, sizeof(claim));
      claim_out_[r]->send(0, kHeaderBytes, AcquirePlace(r));
    }
    if (send_early) send_early();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::memcpy(&theirs[r], NextMessage(r), sizeof(Claim));
      if (theirs[r].early == 0) Release(r, !closing);  // no segment shares the place
    }
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) claim_out_[r]->waitSend();
    }
    WaitControlSends();
  });
  if (!s.ok()) return s;
  if (std::all_of(theirs.begin(), theirs.end(), [&](const Claim& c) { return c.hash == mine; }))
    return absl::OkStatus();
  // The calls differ: the segments peers sent early are not this call's; take them in and
  // drop them.
  s = Run(what, [&] {
    for (int r = 0; r < size_; ++r) {
      for (uint64_t i = 0; r != rank_ && i < std::min<uint64_t>(theirs[r].early, kWindow); ++i) {
        NextMessage(r);  // the first shares the claim's place (read, not yet released)
        Release(r);
      }
    }
    WaitControlSends();
  });
  if (!s.ok()) return s;
  // Every rank sees the same hashes, so every rank comes here and reports the same thing.
  constexpr size_t kEach = kSignatureBytes + kOperationBytes;
  std::vector<char> all(kEach * size_, '\0');
  std::memcpy(all.data() + kEach * rank_, signature.data(), std::min(signature.size(), kSignatureBytes - 1));
  std::memcpy(all.data() + kEach * rank_ + kSignatureBytes, operation.data(),
              std::min(operation.size(), kOperationBytes - 1));
  s = Run(what, [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setOutput(all.data(), all.size());
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
  if (!s.ok()) return s;
  auto sig = [&](int r) { return std::string(all.data() + kEach * r); };
  auto op = [&](int r) { return std::string(all.data() + kEach * r + kSignatureBytes); };
  const char* rule =
      "; every rank must make the same collective calls, in the same order, with tensors of one shape and dtype "
      "(no tensor was changed)";
  for (int r = 1; r < size_; ++r) {
    if (theirs[r].hash == theirs[0].hash) continue;
    if (sig(r) != sig(0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("process group: rank ", r, " called ", sig(r), " but rank 0 called ", sig(0), rule));
    }
    return absl::InvalidArgumentError(
        absl::StrCat("process group: rank ", r, " called ", sig(r), " as ", op(r), " but rank 0 as ", op(0), rule));
  }
  return absl::OkStatus();
}

absl::Status GlooProcessGroup::AllReduce(absl::string_view call, const void* in, void* out, int64_t count, DType dtype,
                                         ReduceOp kind) {
  std::lock_guard lock(mu_);
  const absl::Status reducible = CheckReducible("all_reduce", dtype, kind);
  if (size_ > 1 && reducible.ok() && count > 0) return Direct(call, in, out, count, dtype, kind, /*gather=*/true);
  if (absl::Status s = AgreeLocked(call, Operation("all_reduce", count, dtype, kind)); !s.ok()) return s;
  if (!reducible.ok()) return reducible;
  if (in != out && count > 0) std::memcpy(out, in, count * DTypeSize(dtype));
  return broken_;
}

absl::Status GlooProcessGroup::ReduceScatter(absl::string_view call, void* data, int64_t count, DType dtype,
                                             ReduceOp kind) {
  std::lock_guard lock(mu_);
  const absl::Status reducible = CheckReducible("reduce_scatter", dtype, kind);
  if (size_ > 1 && reducible.ok() && count > 0 && count % size_ == 0) {
    return Direct(call, data, data, count, dtype, kind, /*gather=*/false);
  }
  if (absl::Status s = AgreeLocked(call, Operation("reduce_scatter", count, dtype, kind)); !s.ok()) return s;
  if (!reducible.ok()) return reducible;
  if (count % size_ != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("reduce_scatter: ", count, " elements do not split into ", size_, " equal parts"));
  }
  return broken_;
}

// Rank r owns part r of the elements. It sends every other part of its input straight to
// that part's owner, one segment at a time, into the owner's window for it (kWindow places,
// each handed back with a credit once reduced), and reduces the segments of its own part
// (its own input first, then the others in rank order) into `out`. For an all-reduce
// (`gather`) it sends each reduced segment to every rank at once, straight into their `out`
// (registered for the call); a reduce-scatter moves its part to the front when every send is
// over. Every element is reduced once, on its owner, so every rank gets the same bits; the
// input is only read, so a separate output costs no copy; and each element crosses the
// network twice, as in a ring, but in two steps rather than 2 (size - 1). Segments go out in
// step with the reductions (segment i to everyone, then reduce segment i), so a sender waiting
// for a credit waits for a peer that is never waiting for it.
//
// The first kWindow segments towards each rank leave right behind this rank's claim on the
// call, before the others' claims are in: they land in the peer's window, never in a caller's
// memory, so when the calls differ the peer drops them (AgreeLocked) and nothing is corrupted;
// when they match, the agreement has cost no round trip of its own. Every message is one
// socket write (Gloo's registered buffers): a claim, a segment, a credit, a result. Each
// connection's send buffer was fixed at kSegmentBytes when the group connected
// (SizeSendBuffers), which no segment exceeds.
absl::Status GlooProcessGroup::Direct(absl::string_view call, const void* in, void* out, int64_t count, DType dtype,
                                      ReduceOp kind, bool gather) {
  const int64_t size = DTypeSize(dtype), bytes = count * size;
  const int64_t room = segment_bytes_ / size;  // elements a segment may hold
  auto part = [&](int r) { return std::make_pair(count * r / size_, count * (r + 1) / size_); };
  auto parts = [&](int r) {
    const int64_t n = part(r).second - part(r).first;
    return std::max<int64_t>(1, (n + room - 1) / room);
  };
  // Segment i of part r as [begin, end) in bytes, the same on every rank.
  auto segment = [&](int r, int64_t i) {
    const auto [lo, hi] = part(r);
    const int64_t n = hi - lo, k = parts(r);
    return std::make_pair((lo + n * i / k) * size, (lo + n * (i + 1) / k) * size);
  };
  // This call's buffers on each connection. A peer sends its results only after it has this
  // rank's first segment, which leaves after `results_in` are registered.
  std::vector<std::unique_ptr<gloo::transport::Buffer>> inputs(size_), results_out(size_), results_in(size_);
  const char* name = gather ? "all_reduce" : "reduce_scatter";
  called_ = std::string(call);
  const std::string what = Called(name);
  absl::Status s = Run(what, [&] {
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      auto& pair = context_->getPair(r);
      inputs[r] = pair->createSendBuffer(window_slot_ + r, const_cast<void*>(in), bytes);
      if (!gather) continue;
      results_out[r] = pair->createSendBuffer(result_slot_ + r, out, bytes);
      results_in[r] = pair->createRecvBuffer(result_slot_ + rank_, out, bytes);
    }
  });
  if (!s.ok()) return s;
  std::vector<int64_t> early(size_, 0);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) early[r] = std::min<int64_t>(kWindow, parts(r));
  }
  auto send = [&](int r, int64_t i) {
    const auto [b, e] = segment(r, i);
    // The first segment fills the place its claim opened.
    const int64_t place = i == 0 ? (static_cast<int64_t>((used_[r] - 1) % kWindow) * PlaceBytes()) : AcquirePlace(r);
    inputs[r]->send(b, e - b, place + kHeaderBytes);
  };
  const absl::Status agreed = AgreeLocked(call, Operation(name, count, dtype, kind), early, [&] {
    for (int r = 0; r < size_; ++r) {
      for (int64_t i = 0; i < early[r]; ++i) send(r, i);
    }
  });
  if (!agreed.ok()) {
    // Our early segments were taken in and dropped by peers that disagreed; they must be out of
    // the caller's memory before we return (a broken group has closed its connections).
    const absl::Status sent = Run(what, [&] {
      for (int r = 0; r < size_; ++r) {
        for (int64_t i = 0; i < early[r]; ++i) inputs[r]->waitSend();
      }
    });
    return sent.ok() ? agreed : sent;
  }
  return Run(what, [&] {
    int64_t steps = 0;
    for (int r = 0; r < size_; ++r) steps = std::max(steps, parts(r));
    std::vector<const void*> operands(size_);
    for (int64_t i = 0; i < steps; ++i) {
      for (int r = 0; r < size_; ++r) {
        if (r != rank_ && i >= early[r] && i < parts(r)) send(r, i);
      }
      if (i >= parts(rank_)) continue;
      const auto [b, e] = segment(rank_, i);
      // Our own input first: with in == out, it is read before the result overwrites it.
      operands[0] = static_cast<const char*>(in) + b;
      for (int r = 0, k = 1; r < size_; ++r) {
        if (r != rank_) operands[k++] = NextMessage(r) + kHeaderBytes;
      }
      ReduceOnHost(kind, dtype, operands, static_cast<char*>(out) + b, 0, (e - b) / size);
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        Release(r);
        if (gather) results_out[r]->send(b, e - b, b);
      }
    }
    // With in == out, a peer's results land where our segments for it were read from: each
    // arrives only after the peer has had the segment it is made of.
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      for (int64_t i = 0; i < parts(r); ++i) inputs[r]->waitSend();
      for (int64_t i = 0; i < parts(r) && gather; ++i) results_in[r]->waitRecv();
      for (int64_t i = 0; i < parts(rank_) && gather; ++i) results_out[r]->waitSend();
    }
    WaitControlSends();
    if (!gather && rank_ != 0) {
      const auto [lo, hi] = part(rank_);
      std::memmove(out, static_cast<char*>(out) + lo * size, (hi - lo) * size);
    }
  });
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
