#include "tools/flight_merge.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace kiln::tools {
namespace {

using distributed::FlightDump;
using distributed::FlightDumpEntry;
using distributed::FlightSignature;
using Json = nlohmann::json;

// One member of every process of a group, by global index.
struct Member {
  int rank = 0, local = 0;
  std::map<uint64_t, const FlightDumpEntry*> calls;
};

std::string Name(const Member& m, int members) {
  return members == 1 ? absl::StrCat("rank ", m.rank) : absl::StrCat("rank ", m.rank, " member ", m.local);
}

struct Group {
  int world_size = 0, members = 0;
  std::map<int, const NamedDump*> ranks;
};

absl::StatusOr<std::string> MergeGroup(int id, const Group& g, int tail, Json* summary) {
  std::vector<Member> members;
  for (const auto& [rank, named] : g.ranks) {
    for (int m = 0; m < g.members; ++m) members.push_back({.rank = rank, .local = m});
    for (const FlightDumpEntry& e : named->dump.entries) {
      Member& member = members[members.size() - g.members + e.member];
      if (!member.calls.emplace(e.seq, &e).second) {
        return absl::InvalidArgumentError(
            absl::StrCat(named->file, ": member ", e.member, " has seq ", e.seq, " more than once"));
      }
    }
  }
  std::vector<int> missing;
  for (int r = 0; r < g.world_size && missing.size() < 64; ++r) {
    if (!g.ranks.count(r)) missing.push_back(r);
  }
  std::vector<int> ranks;
  for (const auto& [rank, named] : g.ranks) ranks.push_back(rank);
  std::string out = absl::StrCat("group ", id, ": dumps of rank(s) ", absl::StrJoin(ranks, ", "), " of ", g.world_size,
                                 ", ", g.members, " member(s) each");
  if (!missing.empty())
    absl::StrAppend(&out, "; no dump from rank(s) ", absl::StrJoin(missing, ", "), " (stopped, hung or gone?)");
  out += "\n";
  for (const auto& [rank, named] : g.ranks) {
    if (!named->dump.diagnosis.empty()) absl::StrAppend(&out, "  rank ", rank, " saw: ", named->dump.diagnosis, "\n");
  }
  // The timeline, by enqueue time.
  std::vector<std::pair<const FlightDumpEntry*, const Member*>> all;
  for (const Member& m : members) {
    for (const auto& [seq, e] : m.calls) all.push_back({e, &m});
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a.first->enqueued_us != b.first->enqueued_us ? a.first->enqueued_us < b.first->enqueued_us
                                                        : a.first->seq < b.first->seq;
  });
  const int64_t t0 = all.empty() ? 0 : all.front().first->enqueued_us;
  const size_t from = tail > 0 && all.size() > static_cast<size_t>(tail) ? all.size() - tail : 0;
  if (from > 0) absl::StrAppend(&out, "  ... ", from, " earlier call(s)\n");
  for (size_t i = from; i < all.size(); ++i) {
    const FlightDumpEntry& e = *all[i].first;
    const double took = e.ended_us > 0 ? (e.ended_us - e.enqueued_us) / 1000.0 : -1;
    absl::StrAppend(&out,
                    absl::StrFormat("  %+12.3f ms  %-18s seq %-8d %-10s", (e.enqueued_us - t0) / 1000.0,
                                    Name(*all[i].second, g.members), e.seq, e.state),
                    took >= 0 ? absl::StrFormat(" %9.3f ms  ", took) : std::string("       ... ms  "),
                    FlightSignature(e), e.error.empty() ? "" : absl::StrCat("  [", e.error.substr(0, 200), "]"), "\n");
  }
  // Divergence: from the first seq every member with calls still holds (rings wrap), each seq
  // any member recorded must be the same call on every member.
  uint64_t start = 0;
  std::set<uint64_t> seqs;
  for (const Member& m : members) {
    if (!m.calls.empty()) start = std::max(start, m.calls.begin()->first);
    for (const auto& [seq, e] : m.calls) seqs.insert(seq);
  }
  Json divergence = nullptr;
  for (auto it = seqs.lower_bound(start); it != seqs.end() && divergence.is_null(); ++it) {
    const uint64_t seq = *it;
    std::vector<std::string> lacking, made;
    std::set<std::string> kinds;
    Json calls = Json::object();
    for (const Member& m : members) {
      const auto found = m.calls.find(seq);
      if (found == m.calls.end()) {
        const std::string last = m.calls.empty() ? "no call at all"
                                                 : absl::StrCat("its last is seq ", m.calls.rbegin()->first, " ",
                                                                FlightSignature(*m.calls.rbegin()->second));
        lacking.push_back(absl::StrCat(Name(m, g.members), " has no call (", last, ")"));
        calls[Name(m, g.members)] = nullptr;
      } else {
        kinds.insert(FlightSignature(*found->second));
        made.push_back(absl::StrCat(Name(m, g.members), " called ", FlightSignature(*found->second)));
        calls[Name(m, g.members)] = FlightSignature(*found->second);
      }
    }
    if (lacking.empty() && kinds.size() == 1) continue;
    divergence = Json{{"seq", seq}, {"kind", lacking.empty() ? "different" : "missing"}, {"calls", calls}};
    std::vector<std::string> parts = lacking;
    parts.insert(parts.end(), made.begin(), made.end());
    absl::StrAppend(&out, "first divergence: seq ", seq, ": ", absl::StrJoin(parts, "; "), "\n");
  }
  if (divergence.is_null()) {
    if (seqs.empty()) {
      out += "no calls recorded\n";
    } else {
      absl::StrAppend(&out, "no divergence: every member recorded the same calls from seq ", start, " to ",
                      *seqs.rbegin(), missing.empty() ? "" : " (ranks without a dump unknown)", "\n");
    }
  }
  summary->push_back(Json{{"group", id},
                          {"world_size", g.world_size},
                          {"members", g.members},
                          {"ranks", ranks},
                          {"missing_ranks", missing},
                          {"first_divergence", divergence}});
  return out;
}

}  // namespace

absl::StatusOr<std::string> MergeFlightDumps(const std::vector<NamedDump>& dumps, int tail) {
  std::map<int, Group> groups;
  for (const NamedDump& d : dumps) {
    Group& g = groups[d.dump.group];
    if (g.ranks.empty()) {
      g.world_size = d.dump.world_size;
      g.members = d.dump.members;
    }
    const NamedDump& first = *(g.ranks.empty() ? &d : g.ranks.begin()->second);
    if (d.dump.world_size != g.world_size || d.dump.members != g.members) {
      return absl::InvalidArgumentError(absl::StrCat(d.file, ": group ", d.dump.group, " of ", d.dump.world_size,
                                                     " rank(s) x ", d.dump.members, " member(s), but ", first.file,
                                                     " has ", g.world_size, " x ", g.members));
    }
    if (!g.ranks.emplace(d.dump.rank, &d).second) {
      return absl::InvalidArgumentError(absl::StrCat(d.file, ": rank ", d.dump.rank, " of group ", d.dump.group,
                                                     " again (also in ", g.ranks[d.dump.rank]->file, ")"));
    }
  }
  std::string out;
  Json summary = Json::array();
  for (const auto& [id, g] : groups) {
    absl::StatusOr<std::string> text = MergeGroup(id, g, tail, &summary);
    if (!text.ok()) return text.status();
    out += *text;
  }
  out += Json{{"dumps", dumps.size()}, {"groups", summary}}.dump(-1, ' ', false, Json::error_handler_t::replace);
  out += "\n";
  return out;
}

}  // namespace kiln::tools
