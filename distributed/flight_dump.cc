#include "distributed/flight_dump.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace kiln::distributed {
namespace {

using Json = nlohmann::json;

constexpr const char* kStates[] = {"entered", "started", "completed", "failed"};

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

absl::Status Bad(absl::string_view where, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", what));
}

// The member `key` of `object` as an integer in [lo, hi].
absl::Status Int(const Json& object, const char* key, int64_t lo, int64_t hi, const std::string& where, int64_t* out) {
  const auto it = object.find(key);
  if (it == object.end()) return Bad(where, absl::StrCat("'", key, "' is missing"));
  if (!it->is_number_integer()) return Bad(where, absl::StrCat("'", key, "' is not an integer"));
  // Unsigned values past int64 are out of range by any bound here.
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Bad(where, absl::StrCat("'", key, "' is out of range"));
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) return Bad(where, absl::StrCat("'", key, "' is ", v, ", outside [", lo, ", ", hi, "]"));
  *out = v;
  return absl::OkStatus();
}

absl::Status Text(const Json& object, const char* key, const std::string& where, std::string* out) {
  const auto it = object.find(key);
  if (it == object.end()) return Bad(where, absl::StrCat("'", key, "' is missing"));
  if (!it->is_string()) return Bad(where, absl::StrCat("'", key, "' is not a string"));
  const auto& s = it->get_ref<const std::string&>();
  if (s.size() > kMaxFlightText)
    return Bad(where, absl::StrCat("'", key, "' is longer than ", kMaxFlightText, " bytes"));
  *out = s;
  return absl::OkStatus();
}

absl::StatusOr<FlightDumpEntry> ParseEntry(const Json& j, const FlightDump& dump, size_t index) {
  const std::string where = absl::StrCat("entry ", index);
  if (!j.is_object()) return Bad(where, "is not an object");
  FlightDumpEntry e;
  int64_t v = 0;
  constexpr int64_t kMaxTime = std::numeric_limits<int64_t>::max();
  if (absl::Status s = Int(j, "member", 0, dump.members - 1, where, &v); !s.ok()) return s;
  e.member = static_cast<int>(v);
  // Sequence numbers stay exact in any JSON reader (2^53).
  if (absl::Status s = Int(j, "seq", 0, int64_t{1} << 53, where, &v); !s.ok()) return s;
  e.seq = static_cast<uint64_t>(v);
  for (const auto& [key, field] : {std::pair{"op", &e.op}, std::pair{"tag", &e.tag}, std::pair{"dtype", &e.dtype},
                                   std::pair{"state", &e.state}, std::pair{"error", &e.error}}) {
    if (absl::Status s = Text(j, key, where, field); !s.ok()) return s;
  }
  if (std::find(std::begin(kStates), std::end(kStates), e.state) == std::end(kStates)) {
    return Bad(where, absl::StrCat("'state' is '", e.state, "', not one of ", absl::StrJoin(kStates, ", ")));
  }
  for (const auto& [key, field] : {std::pair{"enqueued_us", &e.enqueued_us}, std::pair{"started_us", &e.started_us},
                                   std::pair{"ended_us", &e.ended_us}}) {
    if (absl::Status s = Int(j, key, 0, kMaxTime, where, field); !s.ok()) return s;
  }
  const auto shape = j.find("shape");
  if (shape == j.end() || !shape->is_array()) return Bad(where, "'shape' is not an array");
  if (shape->size() > kMaxFlightRank)
    return Bad(where, absl::StrCat("'shape' has more than ", kMaxFlightRank, " dims"));
  for (const Json& d : *shape) {
    if (!d.is_number_integer() || (d.is_number_unsigned() && d.get<uint64_t>() > (uint64_t{1} << 62)) ||
        d.get<int64_t>() < 0 || d.get<int64_t>() > (int64_t{1} << 62)) {
      return Bad(where, "'shape' holds something other than a size");
    }
    e.shape.push_back(d.get<int64_t>());
  }
  return e;
}

}  // namespace

std::string FlightTensorName(const FlightDumpEntry& e) {
  return absl::StrCat(e.dtype, "[", absl::StrJoin(e.shape, ","), "]");
}

std::string FlightSignature(const FlightDumpEntry& e) {
  return absl::StrCat(e.op, e.tag.empty() ? "" : absl::StrCat(" '", e.tag, "'"), " of ", FlightTensorName(e));
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
  const Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError("not JSON");
  if (!j.is_object()) return absl::InvalidArgumentError("not a JSON object");
  const std::string where = "the dump";
  std::string format;
  if (absl::Status s = Text(j, "format", where, &format); !s.ok()) return s;
  if (format != kFlightDumpFormat) {
    return Bad(where, absl::StrCat("'format' is '", format, "', not '", kFlightDumpFormat, "'"));
  }
  FlightDump d;
  int64_t v = 0;
  if (absl::Status s = Int(j, "world_size", 1, kMaxFlightWorldSize, where, &v); !s.ok()) return s;
  d.world_size = static_cast<int>(v);
  if (absl::Status s = Int(j, "rank", 0, d.world_size - 1, where, &v); !s.ok()) return s;
  d.rank = static_cast<int>(v);
  if (absl::Status s = Int(j, "members", 1, kMaxFlightMembers, where, &v); !s.ok()) return s;
  d.members = static_cast<int>(v);
  if (absl::Status s = Int(j, "group", 0, std::numeric_limits<int>::max(), where, &v); !s.ok()) return s;
  d.group = static_cast<int>(v);
  if (absl::Status s = Int(j, "capacity", 0, kMaxFlightCapacity, where, &v); !s.ok()) return s;
  d.capacity = static_cast<int>(v);
  if (absl::Status s = Int(j, "dumped_us", 0, std::numeric_limits<int64_t>::max(), where, &d.dumped_us); !s.ok()) {
    return s;
  }
  if (absl::Status s = Text(j, "reason", where, &d.reason); !s.ok()) return s;
  if (absl::Status s = Text(j, "diagnosis", where, &d.diagnosis); !s.ok()) return s;
  const auto entries = j.find("entries");
  if (entries == j.end() || !entries->is_array()) return Bad(where, "'entries' is not an array");
  // At most `capacity` calls per member (an empty ring holds none).
  if (entries->size() > static_cast<size_t>(d.capacity) * d.members) {
    return Bad(where, absl::StrCat("holds ", entries->size(), " entries, more than ", d.members, " member(s) of ",
                                   d.capacity, " calls"));
  }
  for (size_t i = 0; i < entries->size(); ++i) {
    absl::StatusOr<FlightDumpEntry> e = ParseEntry((*entries)[i], d, i);
    if (!e.ok()) return e.status();
    d.entries.push_back(*std::move(e));
  }
  return d;
}

}  // namespace kiln::distributed
