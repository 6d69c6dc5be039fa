// The agreement on each call: every rank sends every other a claim (a hash of the call's
// signature and operation) into its mailbox window, so all see the same hashes and the same
// mismatch, if any; only then do the full signatures follow, to say who called what.
#include <algorithm>
#include <cstring>
#include <functional>
#include <string>
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

// Sends this rank's claim to every peer (then the early segments) and reads theirs into
// `theirs`. A claim opens a place in the receiver's window; the call's first segment, if any,
// fills the rest of it.
void ExchangeClaims(Mailbox& mailbox, int rank, int size, uint64_t mine, const std::vector<int64_t>& early,
                    const std::function<void()>& send_early, bool closing, std::vector<Claim>& theirs) {
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    const Claim claim{mine, early.empty() ? 0 : static_cast<uint64_t>(early[r])};
    mailbox.SendClaim(r, &claim, sizeof(claim));
  }
  if (send_early) send_early();
  for (int r = 0; r < size; ++r) {
    if (r == rank) continue;
    std::memcpy(&theirs[r], mailbox.NextMessage(r), sizeof(Claim));
    if (theirs[r].early == 0) mailbox.Release(r, !closing);  // no segment shares the place
  }
  mailbox.WaitClaims();
  mailbox.WaitCredits();
}

// The calls differ: the segments peers sent early are not this call's; take them in and drop
// them, so the windows stay in step.
void DropEarlySegments(Mailbox& mailbox, int rank, const std::vector<Claim>& theirs) {
  for (int r = 0; r < static_cast<int>(theirs.size()); ++r) {
    for (uint64_t i = 0; r != rank && i < std::min<uint64_t>(theirs[r].early, Mailbox::kWindow); ++i) {
      mailbox.NextMessage(r);  // the first shares the claim's place (read, not yet released)
      mailbox.Release(r);
    }
  }
  mailbox.WaitCredits();
}

// Who called what, from every rank's signature and operation (kEach bytes each in `all`): the
// same message on every rank, as every rank saw the same hashes.
absl::Status Disagreement(const std::vector<char>& all, const std::vector<Claim>& theirs) {
  constexpr size_t kEach = kSignatureBytes + kOperationBytes;
  auto sig = [&](int r) { return std::string(all.data() + kEach * r); };
  auto op = [&](int r) { return std::string(all.data() + kEach * r + kSignatureBytes); };
  const char* rule =
      "; every rank must make the same collective calls, in the same order, with tensors of one shape and dtype "
      "(no tensor was changed)";
  for (int r = 1; r < static_cast<int>(theirs.size()); ++r) {
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
  // Every rank gets every hash, so all see the same mismatch, if any.
  absl::Status s =
      Run(what, [&] { ExchangeClaims(*mailbox_, rank_, size_, mine, early, send_early, closing, theirs); });
  if (!s.ok()) return s;
  if (std::all_of(theirs.begin(), theirs.end(), [&](const Claim& c) { return c.hash == mine; }))
    return absl::OkStatus();
  s = Run(what, [&] { DropEarlySegments(*mailbox_, rank_, theirs); });
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
  return Disagreement(all, theirs);
}

}  // namespace kiln::distributed
