// ParseProcStat (tools/launch_reaper.h) on any bytes: nullopt or a plausible process, never a
// crash. And whatever a process names itself (the input as COMM: ')', spaces, newlines), the
// line the kernel would write for it parses to its own pid, state and parent.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tools/launch_reaper.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (const auto s = kiln::launch::ParseProcStat(text)) {
    Require(s->pid > 0 && s->ppid >= 0);
    Require((s->state >= 'A' && s->state <= 'Z') || (s->state >= 'a' && s->state <= 'z'));
  }
  // The kernel cuts COMM to 15 bytes; longer names must parse too.
  const std::string line = "4242 (" + std::string(text) + ") S 17 4242 4242 0 -1 4194560 120 0 0 0\n";
  const auto s = kiln::launch::ParseProcStat(line);
  Require(s.has_value() && s->pid == 4242 && s->state == 'S' && s->ppid == 17);
  return 0;
}
