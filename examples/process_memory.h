// This process's memory as the kernel counts it: the resident set now and at its highest
// (VmRSS and VmHWM in /proc/self/status), the figures top, ps and /usr/bin/time show. Also the
// two readers memory_budget.h shares: a small kernel file, and its "Key:  123 kB" lines.
#ifndef KILN_EXAMPLES_PROCESS_MEMORY_H_
#define KILN_EXAMPLES_PROCESS_MEMORY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace kiln {

struct ProcessMemory {
  int64_t rss_bytes = 0;       // VmRSS
  int64_t peak_rss_bytes = 0;  // VmHWM
};

// The value of the "Key:  123 kB" line `key` of `text` (/proc/meminfo, /proc/self/status) in
// bytes; nullopt when the line is missing or not a byte count that fits in an int64.
std::optional<int64_t> ParseKibField(absl::string_view text, absl::string_view key);

// VmRSS and VmHWM of /proc/self/status text; nullopt when either is missing or malformed.
std::optional<ProcessMemory> ParseProcessMemory(absl::string_view status);

// `proc`/self/status read now; zeros when it cannot be read or parsed (not Linux).
ProcessMemory ReadProcessMemory(const std::string& proc = "/proc");

// A kernel file of at most 64 KiB (what /proc and cgroup files here are); nullopt when it
// cannot be opened.
std::optional<std::string> ReadKernelFile(const std::string& path);

}  // namespace kiln

#endif  // KILN_EXAMPLES_PROCESS_MEMORY_H_
