#include "examples/memory_report.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace kiln {
namespace {

struct Unit {
  const char* name;
  double bytes;
};

Unit UnitFor(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return {"GiB", static_cast<double>(int64_t{1} << 30)};
  if (bytes >= (int64_t{1} << 20)) return {"MiB", static_cast<double>(int64_t{1} << 20)};
  return {"KiB", 1024.0};
}

std::string InUnit(int64_t bytes, Unit unit) {
  return absl::StrFormat("%.1f", static_cast<double>(bytes) / unit.bytes);
}

}  // namespace

std::string MemoryProgress(absl::Span<const MemoryUsage> devices, const ProcessMemory& process) {
  int64_t largest = 0;
  for (const MemoryUsage& d : devices) largest = std::max(largest, d.peak_bytes);
  const Unit unit = UnitFor(largest);
  const std::string each = absl::StrJoin(devices, ", ", [&](std::string* out, const MemoryUsage& d) {
    absl::StrAppend(out, InUnit(d.current_bytes, unit), "/", InUnit(d.peak_bytes, unit));
  });
  const Unit rss = UnitFor(process.rss_bytes);
  return absl::StrCat("mem ", each, " ", unit.name, ", rss ", InUnit(process.rss_bytes, rss), " ", rss.name);
}

std::string MemoryJsonFields(absl::Span<const MemoryUsage> devices, const ProcessMemory& process) {
  const std::string peaks =
      absl::StrJoin(devices, ",", [](std::string* out, const MemoryUsage& d) { absl::StrAppend(out, d.peak_bytes); });
  return absl::StrCat(",\"peak_bytes\":[", peaks, "],\"peak_rss_bytes\":", process.peak_rss_bytes);
}

}  // namespace kiln
