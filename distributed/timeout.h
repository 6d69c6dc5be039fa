// The one bound on every timeout of kiln's groups and process groups: a deadline is
// now + timeout, which a larger timeout would overflow.
#ifndef KILN_DISTRIBUTED_TIMEOUT_H_
#define KILN_DISTRIBUTED_TIMEOUT_H_

#include <chrono>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace kiln::distributed {

inline constexpr std::chrono::milliseconds kMaxTimeout = std::chrono::hours(24 * 7);

// OK for a timeout in (0, kMaxTimeout]; otherwise InvalidArgument naming `what`.
inline absl::Status CheckTimeout(std::chrono::milliseconds timeout, const char* what) {
  if (timeout.count() > 0 && timeout <= kMaxTimeout) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      what, ": timeout ", timeout.count(), " ms must be positive and at most ", kMaxTimeout.count(), " ms (a week)"));
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_TIMEOUT_H_
