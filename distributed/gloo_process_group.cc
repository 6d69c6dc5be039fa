#include "distributed/gloo_process_group.h"

#include <signal.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/gloo_store.h"
#include "gloo/allgather.h"
#include "gloo/allreduce_halving_doubling.h"
#include "gloo/broadcast.h"
#include "gloo/common/error.h"
#include "gloo/reduce_scatter.h"
#include "gloo/rendezvous/context.h"
#include "gloo/transport/buffer.h"
#include "gloo/transport/pair.h"
#include "gloo/transport/unbound_buffer.h"
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

uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// kiln's element-wise reduction (integers wrap, max/min propagate NaN), as Gloo's reduce
// functions.
template <class T, ReduceKind kKind>
void ReduceInto(T* x, const T* y, size_t n) {
  ReduceOnHost(kKind, DTypeOf<T>(), {x, y}, x, 0, static_cast<int64_t>(n));
}

template <class T>
const gloo::ReductionFunction<T>* GlooReduction(ReduceKind kind) {
  static const gloo::ReductionFunction<T> sum(gloo::SUM, &ReduceInto<T, ReduceKind::kSum>);
  static const gloo::ReductionFunction<T> max(gloo::MAX, &ReduceInto<T, ReduceKind::kMax>);
  static const gloo::ReductionFunction<T> min(gloo::MIN, &ReduceInto<T, ReduceKind::kMin>);
  return kind == ReduceKind::kMax ? &max : kind == ReduceKind::kMin ? &min : &sum;
}

absl::Status CheckReducible(const char* what, DType dtype, ReduceKind kind) {
  if (dtype == DType::kBool) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " of bool across processes is not supported; convert with .to(DType::kI32)"));
  }
  if (kind == ReduceKind::kMean) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a process group sums; the caller divides for a mean"));
  }
  return absl::OkStatus();
}

}  // namespace

ProcessGroupOptions ProcessGroupOptions::From(const LaunchEnv& env, std::chrono::milliseconds timeout) {
  return {.rank = env.rank, .world_size = env.world_size, .rendezvous = env.rendezvous,
          .run_id = env.run_id, .host = env.host, .timeout = timeout};
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
    return absl::InvalidArgumentError(absl::StrCat("process group: world size ", o.world_size,
                                                   " is invalid; it must be at least 1"));
  }
  if (o.rank < 0 || o.rank >= o.world_size) {
    return absl::InvalidArgumentError(absl::StrCat("process group: rank ", o.rank, " is out of range for world size ",
                                                   o.world_size, " (ranks are 0..", o.world_size - 1, ")"));
  }
  if (o.timeout.count() <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("process group: timeout ", o.timeout.count(), " ms must be positive"));
  }
  IgnoreBrokenPipes();
  auto store = RendezvousStore::Open(o.rendezvous, o.run_id);
  if (!store.ok()) return store.status();
  const std::string where = absl::StrCat("rendezvous at ", o.rendezvous,
                                         o.run_id.empty() ? "" : absl::StrCat(" (run ", o.run_id, ")"));
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
  const auto deadline = Clock::now() + o.timeout;
  while (true) {
    std::vector<int> missing;
    try {
      for (int r = 0; r < o.world_size; ++r) {
        if (!(*store)->Has(absl::StrCat("joined/", r))) missing.push_back(r);
      }
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(where, ": the store failed: ", Reason(e)));
    }
    if (missing.empty()) break;
    if (Clock::now() > deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          where, " timed out after ", o.timeout.count(), " ms: rank(s) ", absl::StrJoin(missing, ", "), " of ",
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
    return absl::InvalidArgumentError(absl::StrCat(
        "process group rank ", o.rank, ": cannot listen on '", o.host.empty() ? "this machine's hostname" : o.host,
        "': ", Reason(e), " (set KILN_HOST to an address of this machine)"));
  }
  auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.world_size);
  context->setTimeout(o.timeout);
  try {
    context->connectFullMesh(**store, device);
  } catch (const std::exception& e) {
    const std::string why = Reason(e);
    const std::string msg = absl::StrCat(where, ": rank ", o.rank, " could not connect to the others: ", why);
    return IsTimeout(why) ? absl::DeadlineExceededError(msg) : absl::UnavailableError(msg);
  }
  return std::shared_ptr<GlooProcessGroup>(new GlooProcessGroup(o.rank, o.world_size, o.timeout, std::move(context)));
}

GlooProcessGroup::GlooProcessGroup(int rank, int size, std::chrono::milliseconds timeout,
                                   std::shared_ptr<gloo::Context> context)
    : rank_(rank), size_(size), timeout_(timeout), context_(std::move(context)) {
  if (size_ == 1) return;
  // Every rank takes its slots in the same order, so they match across ranks.
  const int agree_slot = context_->nextSlot();
  agree_theirs_.resize(size_);
  agree_send_.resize(size_);
  agree_recv_.resize(size_);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    auto& pair = context_->getPair(r);
    agree_send_[r] = pair->createSendBuffer(agree_slot, agree_mine_.data(), sizeof(agree_mine_));
    agree_recv_[r] = pair->createRecvBuffer(agree_slot, agree_theirs_[r].data(), sizeof(agree_theirs_[r]));
  }
  scatter_slot_ = context_->nextSlot();
  gather_slot_ = context_->nextSlot();
  segments_.resize(2 * kSegmentBytes / (size_ - 1) * size_ + 64);
}

GlooProcessGroup::~GlooProcessGroup() {
  // A collective can return while some of its last messages (Gloo's algorithms do not wait for
  // every send they start) still sit in this process's send queue, which closing the
  // connections would drop, leaving a peer waiting. So the ranks meet once more: a rank that
  // has heard every other rank's last message has nothing in flight towards it.
  std::lock_guard lock(mu_);
  if (size_ > 1 && broken_.ok()) AgreeLocked("closing the process group").IgnoreError();
}

std::string GlooProcessGroup::Called(absl::string_view op) const {
  return called_.empty() ? std::string(op) : called_;
}

std::string GlooProcessGroup::OtherRanks() const {
  std::vector<int> others;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) others.push_back(r);
  }
  return absl::StrJoin(others, ", ");
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
    broken_ = absl::DeadlineExceededError(absl::StrCat(head, " got no answer from rank(s) ", OtherRanks(),
                                                       " within ", timeout_.count(), " ms (", why, ")", tail));
  } else {
    broken_ = absl::UnavailableError(absl::StrCat(head, " lost its connection to rank(s) ", OtherRanks(), " (",
                                                  why, ")", tail));
  }
  return broken_;
}

absl::Status GlooProcessGroup::Agree(absl::string_view call) {
  std::lock_guard lock(mu_);
  return AgreeLocked(call);
}

absl::Status GlooProcessGroup::AgreeLocked(absl::string_view signature) {
  called_ = std::string(signature);
  if (!broken_.ok() || size_ == 1) return broken_;
  const uint64_t mine = Fnv1a(signature);
  const int turn = agree_calls_++ % 2;
  agree_mine_[turn] = mine;
  std::vector<uint64_t> hashes(size_, mine);
  const std::string what = absl::StrCat("agreeing on ", signature);
  // Every rank gets every hash, so all see the same mismatch, if any.
  absl::Status s = Run(what, [&] {
    const size_t at = turn * sizeof(uint64_t);
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) agree_send_[r]->send(at, sizeof(uint64_t), at);
    }
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      agree_recv_[r]->waitRecv();
      hashes[r] = agree_theirs_[r][turn];
    }
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) agree_send_[r]->waitSend();
    }
  });
  if (!s.ok()) return s;
  if (std::all_of(hashes.begin(), hashes.end(), [&](uint64_t h) { return h == mine; })) return absl::OkStatus();
  // Every rank sees the same hashes, so every rank comes here and reports the same thing.
  std::vector<char> all(kSignatureBytes * size_, '\0');
  std::memcpy(all.data() + kSignatureBytes * rank_, signature.data(), std::min(signature.size(), kSignatureBytes - 1));
  s = Run(what, [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setOutput(all.data(), all.size());
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
  if (!s.ok()) return s;
  auto sig = [&](int r) { return std::string(all.data() + kSignatureBytes * r); };
  for (int r = 1; r < size_; ++r) {
    if (hashes[r] != hashes[0]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "process group: rank ", r, " called ", sig(r), " but rank 0 called ", sig(0),
          "; every rank must make the same collective calls, in the same order, with tensors of one shape "
          "and dtype (nothing was exchanged)"));
    }
  }
  return absl::OkStatus();
}

absl::Status GlooProcessGroup::AllReduce(absl::string_view call, const void* in, void* out, int64_t count,
                                         DType dtype, ReduceKind kind) {
  std::lock_guard lock(mu_);
  if (absl::Status s = AgreeLocked(call); !s.ok()) return s;
  if (absl::Status s = CheckReducible("all_reduce", dtype, kind); !s.ok()) return s;
  if (count == 0) return broken_;
  if (count * DTypeSize(dtype) <= kSmallBytes) return SmallAllReduce(in, out, count, dtype, kind);
  if (size_ == 1) {
    if (in != out) std::memcpy(out, in, count * DTypeSize(dtype));
    return absl::OkStatus();
  }
  return Run(Called("all_reduce"), [&] { DirectAllReduce(in, out, count, dtype, kind); });
}

// Rank r owns part r of the elements. It sends every other part of its input straight to
// that part's owner and receives the others' copies of its own part, one segment at a time (two
// in flight from each rank, into `segments_`); it reduces each segment into `out` (its own
// input first, then the others in rank order) and sends the result to every rank at once, while
// the others' reduced parts land in `out` directly. Every element is reduced once, on its owner,
// so every rank gets the same bits; the input is only read, so a separate output costs no
// copy; a rank sends its first results long before its last are in; and each element crosses
// the network twice, as in a ring, but in two steps rather than 2 (size - 1).
void GlooProcessGroup::DirectAllReduce(const void* in, void* out, int64_t count, DType dtype, ReduceKind kind) {
  const int64_t size = DTypeSize(dtype);
  const int64_t room = kSegmentBytes / (size_ - 1) / size;  // elements a segment may hold
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
  auto* ctx = context_.get();
  const auto input = ctx->createUnboundBuffer(const_cast<void*>(in), count * size);
  const auto output = ctx->createUnboundBuffer(out, count * size);
  // Two segments from each other rank; a buffer per rank, as Gloo completes receives in order
  // per sender and buffer.
  const int64_t slot_bytes = room * size;
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> scratch(size_);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) scratch[r] = ctx->createUnboundBuffer(segments_.data() + r * 2 * slot_bytes, 2 * slot_bytes);
  }
  const int64_t mine = parts(rank_);
  auto receive = [&](int64_t i) {
    const auto [b, e] = segment(rank_, i);
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) scratch[r]->recv(r, scatter_slot_, (i % 2) * slot_bytes, e - b);
    }
  };
  // Receives first: a send whose receive the peer has already posted leaves at once, from the
  // caller's thread, rather than later from Gloo's event loop.
  receive(0);
  if (mine > 1) receive(1);
  // With in == out, a rank sends a reduced segment back only after it has received ours, so
  // our send from that memory is over when its result lands there.
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (int64_t i = 0; i < parts(r); ++i) {
      const auto [b, e] = segment(r, i);
      output->recv(r, gather_slot_, b, e - b);
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (int64_t i = 0; i < parts(r); ++i) {
      const auto [b, e] = segment(r, i);
      input->send(r, scatter_slot_, b, e - b);
    }
  }
  std::vector<const void*> operands(size_);
  for (int64_t i = 0; i < mine; ++i) {
    const auto [b, e] = segment(rank_, i);
    // Our own input first: with in == out, it is read before the result overwrites it.
    operands[0] = static_cast<const char*>(in) + b;
    for (int r = 0, k = 1; r < size_; ++r) {
      if (r == rank_) continue;
      scratch[r]->waitRecv(timeout_);
      operands[k++] = segments_.data() + r * 2 * slot_bytes + (i % 2) * slot_bytes;
    }
    ReduceOnHost(kind, dtype, operands, static_cast<char*>(out) + b, 0, (e - b) / size);
    if (i + 2 < mine) receive(i + 2);
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) output->send(r, gather_slot_, b, e - b);
    }
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    for (int64_t i = 0; i < parts(r); ++i) {
      input->waitSend(timeout_);
      output->waitRecv(timeout_);
    }
    for (int64_t i = 0; i < mine; ++i) output->waitSend(timeout_);
  }
}

absl::Status GlooProcessGroup::SmallAllReduce(const void* in, void* out, int64_t count, DType dtype,
                                              ReduceKind kind) {
  const int64_t bytes = count * DTypeSize(dtype);
  auto key = std::make_tuple(count, dtype, kind);
  auto it = small_.find(key);
  if (it == small_.end()) {
    if (small_.size() >= 64) small_.clear();  // every rank clears at the same call
    Small entry;
    entry.buffer.resize(bytes);
    absl::Status s = Run(Called("all_reduce"), [&] {
      VisitDType(dtype, [&](auto v) {
        using T = decltype(v);
        if constexpr (!std::is_same_v<T, bool>) {
          entry.algorithm = std::make_unique<gloo::AllreduceHalvingDoubling<T>>(
              context_, std::vector<T*>{reinterpret_cast<T*>(entry.buffer.data())}, static_cast<int>(count),
              GlooReduction<T>(kind));
        }
      });
    });
    if (!s.ok()) return s;
    it = small_.emplace(key, std::move(entry)).first;
  }
  Small& small = it->second;
  std::memcpy(small.buffer.data(), in, bytes);
  absl::Status s = Run(Called("all_reduce"), [&] { small.algorithm->run(); });
  if (s.ok()) std::memcpy(out, small.buffer.data(), bytes);
  return s;
}

absl::Status GlooProcessGroup::Broadcast(absl::string_view call, void* data, int64_t bytes, int root) {
  std::lock_guard lock(mu_);
  if (absl::Status s = AgreeLocked(call); !s.ok()) return s;
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
  if (absl::Status s = AgreeLocked(call); !s.ok()) return s;
  if (bytes_per_rank == 0) return broken_;
  return Run(Called("all_gather"), [&] {
    gloo::AllgatherOptions opts(context_);
    opts.setOutput(static_cast<char*>(data), bytes_per_rank * size_);
    opts.setTimeout(timeout_);
    gloo::allgather(opts);
  });
}

absl::Status GlooProcessGroup::ReduceScatter(absl::string_view call, void* data, int64_t count, DType dtype,
                                             ReduceKind kind) {
  std::lock_guard lock(mu_);
  if (absl::Status s = AgreeLocked(call); !s.ok()) return s;
  if (absl::Status s = CheckReducible("reduce_scatter", dtype, kind); !s.ok()) return s;
  if (count % size_ != 0 || count > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("reduce_scatter: ", count, " elements do not split into ", size_,
                                                   " equal parts, or exceed Gloo's limit of 2^31 - 1"));
  }
  if (count == 0) return broken_;
  return Run(Called("reduce_scatter"), [&] {
    VisitDType(dtype, [&](auto v) {
      using T = decltype(v);
      if constexpr (!std::is_same_v<T, bool>) {
        // Gloo's halving-doubling reduce-scatter takes the parts' sizes in an int each.
        const std::vector<int> parts(size_, static_cast<int>(count / size_));
        gloo::ReduceScatterHalvingDoubling<T> algorithm(context_, {static_cast<T*>(data)}, static_cast<int>(count),
                                                        parts, GlooReduction<T>(kind));
        algorithm.run();
      }
    });
  });
}

}  // namespace kiln::distributed

// ThreadSanitizer: Gloo's halving-doubling reduce-scatter sends and receives its notification
// messages through one int member (`dummy_`) at once; the value is never read, so the race
// TSan sees inside Gloo's TCP pair is harmless. Only reports with GlooProcessGroup's
// ReduceScatter on a stack are suppressed (the data buffers are covered by the all-reduce
// paths, which are not). Unused outside TSan builds.
extern "C" const char* __tsan_default_suppressions() {
  return "race:kiln::distributed::GlooProcessGroup::ReduceScatter\n";
}
