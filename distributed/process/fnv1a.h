// FNV-1a, 64 bits: the hash ranks compare calls and settings by (identical on every rank and
// platform, unlike std::hash). Not a defence against a chosen collision: the ranks are
// trusted once they have proven the run token.
#ifndef KILN_DISTRIBUTED_PROCESS_FNV1A_H_
#define KILN_DISTRIBUTED_PROCESS_FNV1A_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace kiln::distributed {

inline uint64_t Fnv1a(absl::string_view s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_FNV1A_H_
