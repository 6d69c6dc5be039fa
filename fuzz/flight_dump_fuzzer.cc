// ParseFlightDump and tools/flight_recorder's merge on any bytes: a status, never a crash. The
// input is one or two dumps (split at the first NUL byte, as two ranks' files). What parses
// writes back to JSON that parses to the same dump, and merges into a report ending in one
// JSON line.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

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
  std::vector<kiln::tools::NamedDump> dumps;
  for (size_t i = 0; i < files.size(); ++i) {
    const auto dump = kiln::distributed::ParseFlightDump(files[i]);
    if (!dump.ok()) {
      Require(dump.status().code() == absl::StatusCode::kInvalidArgument && !dump.status().message().empty());
      continue;
    }
    const std::string json = kiln::distributed::FlightDumpToJson(*dump);
    const auto again = kiln::distributed::ParseFlightDump(json);
    Require(again.ok() && kiln::distributed::FlightDumpToJson(*again) == json);
    dumps.push_back(kiln::tools::NamedDump{"dump" + std::to_string(i), *dump});
  }
  const auto report = kiln::tools::MergeFlightDumps(dumps, static_cast<int>(size % 5));
  if (!report.ok()) {
    Require(report.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  Require(!report->empty() && report->back() == '\n');
  const size_t last = report->rfind('\n', report->size() - 2);
  const auto line = nlohmann::json::parse(report->substr(last == std::string::npos ? 0 : last + 1), nullptr, false);
  Require(line.is_object() && line["dumps"] == dumps.size());
  return 0;
}
