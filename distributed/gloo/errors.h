// How Gloo's failures read as kiln's statuses. Gloo throws exceptions whose messages start
// with "[file:line] "; a process group reports what follows, as DeadlineExceeded when it says
// a deadline passed and as Unavailable otherwise.
#ifndef KILN_DISTRIBUTED_GLOO_ERRORS_H_
#define KILN_DISTRIBUTED_GLOO_ERRORS_H_

#include <chrono>
#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::distributed {

// A Gloo exception's message without Gloo's "[file:line] " prefixes.
std::string Reason(const std::exception& e);

// Whether a reason says that a deadline passed.
bool IsTimeout(const std::string& reason);

// `message` as DeadlineExceeded when `reason` is a timeout, otherwise as Unavailable.
absl::Status ConnectionError(const std::string& reason, const std::string& message);

// The status that breaks a group for good when `what` failed with `reason` on rank `rank` of
// `size`: DeadlineExceeded (no answer from the other ranks within `timeout`) or Unavailable
// (the connection to them lost), naming the other ranks and saying that the group is unusable
// from now on.
absl::Status BrokenGroupError(int rank, int size, absl::string_view what, std::chrono::milliseconds timeout,
                              const std::string& reason);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GLOO_ERRORS_H_
