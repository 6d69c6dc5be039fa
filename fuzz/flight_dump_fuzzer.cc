// ParseFlightDump, the streaming reader and tools/flight_recorder's merge on any bytes: a
// status, never a crash. The input is one or two dumps (split at the first NUL byte, as two
// ranks' files). What parses writes back to JSON that parses to the same dump; the merge reads
// the same bytes streamed in pieces of a size the input picks (so tokens cross the reader's
// buffer edges), takes only dumps the parser takes, all of them but those with a member's seq
// twice or clashing with each other, and writes a report ending in one JSON line.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"
#include "distributed/flight_dump.h"
#include "nlohmann/json.hpp"
#include "tools/flight_merge.h"

namespace {

void Require(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t nul = text.find('\0');
  std::vector<absl::string_view> files{text.substr(0, nul)};
  if (nul != absl::string_view::npos) files.push_back(text.substr(nul + 1));
  const size_t piece = 1 + size % 7;
  kiln::tools::FlightMerge merge;
  size_t added = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto dump = kiln::distributed::ParseFlightDump(files[i]);
    absl::string_view rest = files[i];
    const absl::Status merged =
        merge.Add("dump" + std::to_string(i), [&](char* buf, size_t n) -> absl::StatusOr<size_t> {
          n = std::min({n, piece, rest.size()});
          std::memcpy(buf, rest.data(), n);
          rest.remove_prefix(n);
          return n;
        });
    Require(merged.ok() || merged.code() == absl::StatusCode::kInvalidArgument);
    added += merged.ok();
    if (!dump.ok()) {
      Require(dump.status().code() == absl::StatusCode::kInvalidArgument && !dump.status().message().empty());
      Require(!merged.ok());
      continue;
    }
    // The first dump has nothing to clash with, so the merge takes it unless a member holds
    // a seq twice (which the parser lets through).
    Require(i > 0 || merged.ok() || absl::StrContains(merged.message(), " more than once"));
    const std::string json = kiln::distributed::FlightDumpToJson(*dump);
    const auto again = kiln::distributed::ParseFlightDump(json);
    Require(again.ok() && kiln::distributed::FlightDumpToJson(*again) == json);
  }
  std::string report;
  merge.Write(static_cast<int>(size % 5), [&](absl::string_view s) { report.append(s.data(), s.size()); });
  Require(!report.empty() && report.back() == '\n');
  const size_t last = report.rfind('\n', report.size() - 2);
  const auto line = nlohmann::json::parse(report.substr(last == std::string::npos ? 0 : last + 1), nullptr, false);
  Require(line.is_object() && line["dumps"] == added);
  return 0;
}
