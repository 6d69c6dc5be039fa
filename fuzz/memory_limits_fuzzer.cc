// The kernel's memory files as examples/memory_budget and examples/process_memory parse them
// (/proc/meminfo, /proc/self/status, /proc/self/cgroup, cgroup memory.max and memory.stat), on
// any text: a value or nullopt, never a crash; what is accepted is a non-negative byte count,
// and a cgroup path is absolute with no "." or ".." part (it is joined under /sys/fs/cgroup).
#include <cstdint>
#include <cstdlib>
#include <string>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "examples/memory_budget.h"
#include "examples/process_memory.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

void CheckPath(const std::optional<std::string>& path) {
  if (!path) return;
  Require(!path->empty() && (*path)[0] == '/');
  for (absl::string_view part : absl::StrSplit(*path, '/')) Require(part != "." && part != "..");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& bytes : {kiln::ParseMemAvailable(text), kiln::ParseVmSize(text), kiln::ParseCgroupBytes(text),
                            kiln::ParseStatField(text, "inactive_file")}) {
    Require(!bytes || *bytes >= 0);
  }
  if (const auto process = kiln::ParseProcessMemory(text)) {
    Require(process->rss_bytes >= 0 && process->peak_rss_bytes >= 0);
    Require(process->rss_bytes == kiln::ParseKibField(text, "VmRSS"));
    Require(process->peak_rss_bytes == kiln::ParseKibField(text, "VmHWM"));
  }
  const kiln::CgroupPaths paths = kiln::ParseProcCgroup(text);
  CheckPath(paths.unified);
  CheckPath(paths.memory);
  return 0;
}
