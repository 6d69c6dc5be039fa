// kiln's all-reduce and reduce-scatter over the Gloo process group's mailbox (mailbox.h).
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/collective_kernels.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/gloo/mailbox.h"
#include "gloo/context.h"
#include "gloo/transport/buffer.h"
#include "gloo/transport/pair.h"

namespace kiln::distributed {
namespace {

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

// One call of Direct on this rank. Part r, the elements rank r owns, goes in segments of at
// most a mailbox segment; segment i of part r is the same bytes on every rank.
class GlooProcessGroup::DirectCall {
 public:
  DirectCall(GlooProcessGroup& group, const void* in, void* out, int64_t count, DType dtype, ReduceOp kind,
             bool gather);

  // This call's buffers on each connection. A peer sends its results only after it has this
  // rank's first segment, which leaves after the result buffers are registered.
  void RegisterBuffers();
  // How many segments towards each rank go before the agreement, and sending them.
  const std::vector<int64_t>& early() const { return early_; }
  void SendEarly();
  // After a disagreement: the early segments are out of the caller's memory.
  void AwaitEarlySends();
  // Step i: segment i to every owner, then this rank's segment i reduced (and, for an
  // all-reduce, sent to everyone).
  int64_t steps() const;
  void Step(int64_t i);
  // Every send and result is through; a reduce-scatter's part moves to the front.
  void Finish();

 private:
  std::pair<int64_t, int64_t> part(int r) const;                // elements [begin, end)
  int64_t segments(int r) const;                                // of part r
  std::pair<int64_t, int64_t> segment(int r, int64_t i) const;  // bytes [begin, end)
  void Send(int r, int64_t i);

  GlooProcessGroup& g_;
  const void* const in_;
  void* const out_;
  const int64_t count_;
  const DType dtype_;
  const ReduceOp kind_;
  const bool gather_;
  const int64_t element_;  // bytes
  const int64_t room_;     // elements a segment may hold
  std::vector<std::unique_ptr<gloo::transport::Buffer>> inputs_, results_out_, results_in_;
  std::vector<int64_t> early_;
  std::vector<const void*> operands_;
};

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
// (Mailbox::SizeSendBuffers), which no segment exceeds.
absl::Status GlooProcessGroup::Direct(absl::string_view call, const void* in, void* out, int64_t count, DType dtype,
                                      ReduceOp kind, bool gather) {
  DirectCall direct(*this, in, out, count, dtype, kind, gather);
  const char* name = gather ? "all_reduce" : "reduce_scatter";
  called_ = std::string(call);
  const std::string what = Called(name);
  if (absl::Status s = Run(what, [&] { direct.RegisterBuffers(); }); !s.ok()) return s;
  const absl::Status agreed =
      AgreeLocked(call, Operation(name, count, dtype, kind), direct.early(), [&] { direct.SendEarly(); });
  if (!agreed.ok()) {
    // Our early segments were taken in and dropped by peers that disagreed; they must be out of
    // the caller's memory before we return (a broken group has closed its connections).
    const absl::Status sent = Run(what, [&] { direct.AwaitEarlySends(); });
    return sent.ok() ? agreed : sent;
  }
  return Run(what, [&] {
    for (int64_t i = 0; i < direct.steps(); ++i) direct.Step(i);
    direct.Finish();
  });
}

GlooProcessGroup::DirectCall::DirectCall(GlooProcessGroup& group, const void* in, void* out, int64_t count, DType dtype,
                                         ReduceOp kind, bool gather)
    : g_(group),
      in_(in),
      out_(out),
      count_(count),
      dtype_(dtype),
      kind_(kind),
      gather_(gather),
      element_(DTypeSize(dtype)),
      room_(group.mailbox_->segment_bytes() / element_),
      inputs_(group.size_),
      results_out_(group.size_),
      results_in_(group.size_),
      early_(group.size_, 0),
      operands_(group.size_) {
  for (int r = 0; r < g_.size_; ++r) {
    if (r != g_.rank_) early_[r] = std::min<int64_t>(Mailbox::kWindow, segments(r));
  }
}

std::pair<int64_t, int64_t> GlooProcessGroup::DirectCall::part(int r) const {
  return {count_ * r / g_.size_, count_ * (r + 1) / g_.size_};
}

int64_t GlooProcessGroup::DirectCall::segments(int r) const {
  const int64_t n = part(r).second - part(r).first;
  return std::max<int64_t>(1, (n + room_ - 1) / room_);
}

std::pair<int64_t, int64_t> GlooProcessGroup::DirectCall::segment(int r, int64_t i) const {
  const auto [lo, hi] = part(r);
  const int64_t n = hi - lo, k = segments(r);
  return {(lo + n * i / k) * element_, (lo + n * (i + 1) / k) * element_};
}

int64_t GlooProcessGroup::DirectCall::steps() const {
  int64_t most = 0;
  for (int r = 0; r < g_.size_; ++r) most = std::max(most, segments(r));
  return most;
}

void GlooProcessGroup::DirectCall::RegisterBuffers() {
  const int64_t bytes = count_ * element_;
  for (int r = 0; r < g_.size_; ++r) {
    if (r == g_.rank_) continue;
    inputs_[r] = g_.mailbox_->Source(r, in_, bytes);
    if (!gather_) continue;
    auto& pair = g_.context_->getPair(r);
    results_out_[r] = pair->createSendBuffer(g_.result_slot_ + r, out_, bytes);
    results_in_[r] = pair->createRecvBuffer(g_.result_slot_ + g_.rank_, out_, bytes);
  }
}

void GlooProcessGroup::DirectCall::Send(int r, int64_t i) {
  const auto [b, e] = segment(r, i);
  // The first segment fills the place its claim opened.
  g_.mailbox_->SendSegment(*inputs_[r], r, b, e - b, /*in_claim=*/i == 0);
}

void GlooProcessGroup::DirectCall::SendEarly() {
  for (int r = 0; r < g_.size_; ++r) {
    for (int64_t i = 0; i < early_[r]; ++i) Send(r, i);
  }
}

void GlooProcessGroup::DirectCall::AwaitEarlySends() {
  for (int r = 0; r < g_.size_; ++r) {
    for (int64_t i = 0; i < early_[r]; ++i) inputs_[r]->waitSend();
  }
}

void GlooProcessGroup::DirectCall::Step(int64_t i) {
  for (int r = 0; r < g_.size_; ++r) {
    if (r != g_.rank_ && i >= early_[r] && i < segments(r)) Send(r, i);
  }
  if (i >= segments(g_.rank_)) return;
  const auto [b, e] = segment(g_.rank_, i);
  // Our own input first: with in == out, it is read before the result overwrites it.
  operands_[0] = static_cast<const char*>(in_) + b;
  for (int r = 0, k = 1; r < g_.size_; ++r) {
    if (r != g_.rank_) operands_[k++] = g_.mailbox_->NextSegment(r);
  }
  ReduceOnHost(kind_, dtype_, operands_, static_cast<char*>(out_) + b, 0, (e - b) / element_);
  for (int r = 0; r < g_.size_; ++r) {
    if (r == g_.rank_) continue;
    g_.mailbox_->Release(r);
    if (gather_) results_out_[r]->send(b, e - b, b);
  }
}

void GlooProcessGroup::DirectCall::Finish() {
  // With in == out, a peer's results land where our segments for it were read from: each
  // arrives only after the peer has had the segment it is made of.
  for (int r = 0; r < g_.size_; ++r) {
    if (r == g_.rank_) continue;
    for (int64_t i = 0; i < segments(r); ++i) inputs_[r]->waitSend();
    for (int64_t i = 0; i < segments(r) && gather_; ++i) results_in_[r]->waitRecv();
    for (int64_t i = 0; i < segments(g_.rank_) && gather_; ++i) results_out_[r]->waitSend();
  }
  g_.mailbox_->WaitCredits();
  if (!gather_ && g_.rank_ != 0) {
    const auto [lo, hi] = part(g_.rank_);
    std::memmove(out_, static_cast<char*>(out_) + lo * element_, (hi - lo) * element_);
  }
}

}  // namespace kiln::distributed
