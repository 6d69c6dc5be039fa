// The streaming flight dump reader: the same dump whatever the pieces the bytes come in, keys
// in any order (a head after its entries is checked at the end), and the bounds that keep its
// memory small: a long token or deep nesting is refused as it streams in, without reading on.
#include "distributed/flight_dump_reader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace kiln::distributed {
namespace {

struct Read {
  absl::StatusOr<FlightDump> head;
  std::vector<FlightDumpEntry> entries;
  size_t bytes_given = 0;  // how far the reader read
};

// Reads `text` handed over `piece` bytes at a time.
Read ReadIn(absl::string_view text, size_t piece = 1 << 20) {
  Read r;
  r.head = ReadFlightDump(
      [&](char* buf, size_t size) -> absl::StatusOr<size_t> {
        const size_t n = std::min({size, piece, text.size() - r.bytes_given});
        std::memcpy(buf, text.data() + r.bytes_given, n);
        r.bytes_given += n;
        return n;
      },
      [&](const FlightDumpEntry& e) {
        r.entries.push_back(e);
        return absl::OkStatus();
      });
  return r;
}

FlightDump TwoMembers() {
  FlightDump d{.rank = 1, .world_size = 2, .members = 2, .capacity = 4, .dumped_us = 9, .diagnosis = "rank 0 is in"};
  for (int m = 0; m < 2; ++m) {
    for (uint64_t seq = 0; seq < 3; ++seq) {
      d.entries.push_back({.member = m,
                           .seq = seq,
                           .op = "all_reduce(sum)",
                           .tag = absl::StrCat("step ", seq),
                           .dtype = "f32",
                           .shape = {2, 3},
                           .enqueued_us = 10,
                           .state = "completed"});
    }
  }
  return d;
}

TEST(FlightDumpReader, AnyPiecesGiveTheSameDump) {
  const std::string json = FlightDumpToJson(TwoMembers());
  for (size_t piece : {1, 7, 4096, 1 << 20}) {
    Read r = ReadIn(json, piece);
    ASSERT_TRUE(r.head.ok()) << r.head.status();
    EXPECT_TRUE(r.head->entries.empty());
    r.head->entries = r.entries;
    EXPECT_EQ(FlightDumpToJson(*r.head), json) << piece;
  }
}

TEST(FlightDumpReader, HeadAfterEntriesIsCheckedAtTheEnd) {
  const std::string entry =
      R"({"member": 1, "seq": 0, "op": "x", "tag": "", "dtype": "f32", "shape": [], "enqueued_us": 0,)"
      R"( "started_us": 0, "ended_us": 0, "state": "entered", "error": ""})";
  const std::string head = R"("format": "kiln-flight-recorder 1", "group": 0, "rank": 0, "world_size": 1,)"
                           R"( "members": MEMBERS, "capacity": 1, "dumped_us": 0, "reason": "", "diagnosis": "")";
  auto dump = [&](const std::string& members, bool head_first) {
    const std::string h = absl::StrReplaceAll(head, {{"MEMBERS", members}});
    const std::string entries = absl::StrCat(R"("entries": [)", entry, "]");
    return absl::StrCat("{", head_first ? h : entries, ", ", head_first ? entries : h, "}");
  };
  EXPECT_TRUE(ReadIn(dump("2", false)).head.ok());
  // Member 1 of 1: refused at the entry when the head came first, at the end otherwise.
  EXPECT_EQ(ReadIn(dump("1", true)).head.status().message(), "entry 0: 'member' is 1, outside [0, 0]");
  const Read late = ReadIn(dump("1", false));
  EXPECT_EQ(late.head.status().message(), "entry 0: 'member' is 1, outside [0, 0]");
  EXPECT_EQ(late.entries.size(), 1u);
  EXPECT_EQ(ReadIn(R"({"entries": []})").head.status().message(), "the dump: 'format' is missing");
}

TEST(FlightDumpReader, RefusesAKeyTwice) {
  EXPECT_EQ(ReadIn(R"({"rank": 0, "rank": 1})").head.status().message(), "the dump: 'rank' appears twice");
  std::string json = FlightDumpToJson(TwoMembers());
  json.replace(json.find(R"("seq":0)"), 7, R"("seq":0,"seq":1)");
  EXPECT_EQ(ReadIn(json).head.status().message(), "entry 0: 'seq' appears twice");
}

TEST(FlightDumpReader, UnknownKeysAreSkippedToADepth) {
  auto nested = [](int depth) {
    return absl::StrCat(R"({"extra": )", std::string(depth, '['), std::string(depth, ']'), R"(, "format": "x"})");
  };
  EXPECT_EQ(ReadIn(nested(kMaxFlightNesting)).head.status().message(),
            "the dump: 'format' is 'x', not 'kiln-flight-recorder 1'");
  EXPECT_EQ(ReadIn(nested(kMaxFlightNesting + 1)).head.status().message(), "nested deeper than 64 levels");
}

TEST(FlightDumpReader, TextsAndTokensAreBounded) {
  FlightDump d = TwoMembers();
  d.entries[0].tag = std::string(kMaxFlightText, 't');
  EXPECT_TRUE(ReadIn(FlightDumpToJson(d)).head.ok());
  std::string json = FlightDumpToJson(d);
  json.insert(json.find("tttt"), "t");
  EXPECT_EQ(ReadIn(json).head.status().message(), "entry 0: 'tag' is longer than 4096 bytes");
  // A string of 8 MiB is refused at its 24,579th byte: the reader reads no further than its
  // buffer (64 KiB) past that, and never holds the string.
  const std::string huge = absl::StrCat(R"({"format": ")", std::string(8 << 20, 'x'), R"("})");
  const Read r = ReadIn(huge, 4096);
  EXPECT_EQ(r.head.status().message(),
            "byte 24589: a token longer than 24578 bytes (a dump's texts are at most 4096 bytes)");
  EXPECT_LT(r.bytes_given, 32u << 10);
  // A number too (here, one no JSON reader would take anyway).
  EXPECT_EQ(ReadIn(absl::StrCat(R"({"rank": )", std::string(30000, '1'), "}")).head.status().message(),
            "byte 24587: a token longer than 24578 bytes (a dump's texts are at most 4096 bytes)");
}

TEST(FlightDumpReader, SourceAndSinkErrorsStopIt) {
  const std::string json = FlightDumpToJson(TwoMembers());
  int taken = 0;
  size_t at = 0;
  const absl::StatusOr<FlightDump> full = ReadFlightDump(
      [&](char* buf, size_t size) -> absl::StatusOr<size_t> {
        const size_t n = std::min(size, json.size() - at);
        std::memcpy(buf, json.data() + at, n);
        at += n;
        return n;
      },
      [&](const FlightDumpEntry&) { return ++taken == 2 ? absl::ResourceExhaustedError("full") : absl::OkStatus(); });
  EXPECT_EQ(full.status(), absl::ResourceExhaustedError("full"));
  EXPECT_EQ(taken, 2);
  const absl::StatusOr<FlightDump> broken =
      ReadFlightDump([](char*, size_t) -> absl::StatusOr<size_t> { return absl::DataLossError("disk"); },
                     [](const FlightDumpEntry&) { return absl::OkStatus(); });
  EXPECT_EQ(broken.status(), absl::DataLossError("disk"));
}

}  // namespace
}  // namespace kiln::distributed
