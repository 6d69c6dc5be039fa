#include "distributed/flight_dump.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/flight_dump_reader.h"
#include "nlohmann/json.hpp"

namespace kiln::distributed {
namespace {

using Json = nlohmann::json;

// Text cut to the bound, at a character boundary JSON accepts (the writer's own strings
// are short; a long status message is the one that gets cut).
std::string Cut(absl::string_view s) {
  if (s.size() <= kMaxFlightText) return std::string(s);
  size_t n = kMaxFlightText;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return std::string(s.substr(0, n));
}

Json EntryJson(const FlightDumpEntry& e) {
  return Json{{"member", e.member},
              {"seq", e.seq},
              {"op", e.op},
              {"tag", Cut(e.tag)},
              {"dtype", e.dtype},
              {"shape", e.shape},
              {"enqueued_us", e.enqueued_us},
              {"started_us", e.started_us},
              {"ended_us", e.ended_us},
              {"state", e.state},
              {"error", Cut(e.error)}};
}

}  // namespace

std::string FlightTensorName(const FlightDumpEntry& e) {
  return absl::StrCat(e.dtype, "[", absl::StrJoin(e.shape, ","), "]");
}

std::string FlightSignature(absl::string_view op, absl::string_view tag, absl::string_view dtype,
                            absl::string_view dims) {
  return absl::StrCat(op, tag.empty() ? "" : absl::StrCat(" '", tag, "'"), " of ", dtype, "[", dims, "]");
}

std::string FlightSignature(const FlightDumpEntry& e) {
  return FlightSignature(e.op, e.tag, e.dtype, absl::StrJoin(e.shape, ","));
}

std::string FlightCallName(const FlightDumpEntry& e) {
  if (!e.tag.empty()) return absl::StrCat("'", e.tag, "'");
  return absl::StrCat(e.op, " of ", FlightTensorName(e));
}

std::string FlightDumpToJson(const FlightDump& d) {
  const Json head{{"format", kFlightDumpFormat}, {"group", d.group},        {"rank", d.rank},
                  {"world_size", d.world_size},  {"members", d.members},    {"capacity", d.capacity},
                  {"dumped_us", d.dumped_us},    {"reason", Cut(d.reason)}, {"diagnosis", Cut(d.diagnosis)}};
  // The head without its closing brace, then one entry per line.
  std::string out = head.dump(-1, ' ', false, Json::error_handler_t::replace);
  out.pop_back();
  out += ", \"entries\": [";
  for (size_t i = 0; i < d.entries.size(); ++i) {
    out += i == 0 ? "\n" : ",\n";
    out += EntryJson(d.entries[i]).dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  out += "]}\n";
  return out;
}

absl::StatusOr<FlightDump> ParseFlightDump(absl::string_view text) {
  std::vector<FlightDumpEntry> entries;
  absl::StatusOr<FlightDump> d = ReadFlightDump(
      [&text](char* buf, size_t size) -> absl::StatusOr<size_t> {
        const size_t n = std::min(size, text.size());
        std::memcpy(buf, text.data(), n);
        text.remove_prefix(n);
        return n;
      },
      [&entries](const FlightDumpEntry& e) {
        entries.push_back(e);
        return absl::OkStatus();
      });
  if (d.ok()) d->entries = std::move(entries);
  return d;
}

}  // namespace kiln::distributed
