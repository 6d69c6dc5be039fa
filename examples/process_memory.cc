#include "examples/process_memory.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace kiln {

std::optional<int64_t> ParseKibField(absl::string_view text, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, ":")) continue;
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumeSuffix(&line, "kB")) return std::nullopt;
    uint64_t kib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &kib) || kib > uint64_t{INT64_MAX} / 1024) {
      return std::nullopt;
    }
    return static_cast<int64_t>(kib * 1024);
  }
  return std::nullopt;
}

std::optional<ProcessMemory> ParseProcessMemory(absl::string_view status) {
  const std::optional<int64_t> rss = ParseKibField(status, "VmRSS"), peak = ParseKibField(status, "VmHWM");
  if (!rss || !peak) return std::nullopt;
  return ProcessMemory{.rss_bytes = *rss, .peak_rss_bytes = *peak};
}

ProcessMemory ReadProcessMemory(const std::string& proc) {
  const std::optional<std::string> status = ReadKernelFile(proc + "/self/status");
  return status ? ParseProcessMemory(*status).value_or(ProcessMemory{}) : ProcessMemory{};
}

std::optional<std::string> ReadKernelFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::string text(64 * 1024, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace kiln
