// The agreement on each call: every rank sends every other a claim (a hash of the call's
// signature and operation) into its mailbox window, so all see the same hashes and the same
// mismatch, if any; only then do the full signatures follow, to say who called what.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/gloo/mailbox.h"
#include "distributed/process/fnv1a.h"
#include "gloo/allgather.h"

namespace kiln::distributed {
namespace {

// Signatures travel as a hash first (8 bytes per rank); only when hashes differ do the full
// strings follow, cut to this many bytes, to say who called what.
constexpr size_t kSignatureBytes = 240;
// The operation a call makes (which, how many elements of what), compared with the call's
// signature: a caller's signature may not say it.
constexpr size_t kOperationBytes = 96;

// A claim, at the start of a place in the receiver's window.
struct Claim {
  uint64_t hash = 0;   // of the call's signature
  uint64_t early = 0;  // segments that follow before the answer, the first in this place
};

}  // namespace

absl::Status GlooProcessGroup::Agree(absl::string_view call) {
  std::lock_guard lock(mu_);
  return AgreeLocked(call, "an agreement");
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
      mailbox_->SendClaim(r, &claim, sizeof(claim));
    }
    if (send_early) send_early();
    for (int r = 0; r < size_; ++r) {
      if (r == rank_) continue;
      std::memcpy(&theirs[r], mailbox_->NextMessage(r), sizeof(Claim));
      if (theirs[r].early == 0) mailbox_->Release(r, !closing);  // no segment shares the place
    }
    mailbox_->WaitClaims();
    mailbox_->WaitCredits();
  });
  if (!s.ok()) return s;
  if (std::all_of(theirs.begin(), theirs.end(), [&](const Claim& c) { return c.hash == mine; }))
    return absl::OkStatus();
  // The calls differ: the segments peers sent early are not this call's; take them in and
  // drop them.
  s = Run(what, [&] {
    for (int r = 0; r < size_; ++r) {
      for (uint64_t i = 0; r != rank_ && i < std::min<uint64_t>(theirs[r].early, Mailbox::kWindow); ++i) {
        mailbox_->NextMessage(r);  // the first shares the claim's place (read, not yet released)
        mailbox_->Release(r);
      }
    }
    mailbox_->WaitCredits();
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

}  // namespace kiln::distributed
