// The run's secret and the proofs made with it: every connection of a process group proves
// that it knows the token (KILN_RUN_TOKEN, made by tools/launch or the user's launcher) with
// an HMAC-SHA256 over a fresh challenge, so the token itself never crosses the network.
#ifndef KILN_DISTRIBUTED_PROCESS_RUN_TOKEN_H_
#define KILN_DISTRIBUTED_PROCESS_RUN_TOKEN_H_

#include <array>
#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln::distributed {

using Mac = std::array<unsigned char, 32>;

// HMAC-SHA256 of `message` under `key`.
Mac Hmac(absl::string_view key, absl::string_view message);

// Compares in constant time (a timing difference would leak how much of a guess was right).
bool SameMac(const Mac& a, const Mac& b);

// Fills `out` from the kernel's random source (getrandom(2)); false if it failed.
bool RandomBytes(void* out, size_t n);

// The token of a run launched without one: derived from what every rank of it shares (the
// run id and the rendezvous address). It keeps out processes of other runs and stray or
// scanning connections, not someone who knows the run id and address; a launcher that sets
// KILN_RUN_TOKEN keeps out anyone who cannot read the ranks' environment.
std::string DefaultRunToken(absl::string_view run_id, absl::string_view rendezvous);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_RUN_TOKEN_H_
