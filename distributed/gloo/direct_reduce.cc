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
  const int64_t size = DTypeSize(dtype), bytes = count * size;
  const int64_t room = mailbox_->segment_bytes() / size;  // elements a segment may hold
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
      inputs[r] = mailbox_->Source(r, in, bytes);
      if (!gather) continue;
      auto& pair = context_->getPair(r);
      results_out[r] = pair->createSendBuffer(result_slot_ + r, out, bytes);
      results_in[r] = pair->createRecvBuffer(result_slot_ + rank_, out, bytes);
    }
  });
  if (!s.ok()) return s;
  std::vector<int64_t> early(size_, 0);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) early[r] = std::min<int64_t>(Mailbox::kWindow, parts(r));
  }
  auto send = [&](int r, int64_t i) {
    const auto [b, e] = segment(r, i);
    // The first segment fills the place its claim opened.
    mailbox_->SendSegment(*inputs[r], r, b, e - b, /*in_claim=*/i == 0);
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
        if (r != rank_) operands[k++] = mailbox_->NextSegment(r);
      }
      ReduceOnHost(kind, dtype, operands, static_cast<char*>(out) + b, 0, (e - b) / size);
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        mailbox_->Release(r);
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
    mailbox_->WaitCredits();
    if (!gather && rank_ != 0) {
      const auto [lo, hi] = part(rank_);
      std::memmove(out, static_cast<char*>(out) + lo * size, (hi - lo) * size);
    }
  });
}

}  // namespace kiln::distributed
