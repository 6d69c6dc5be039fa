#include "tools/flight_merge.h"

#include <algorithm>
#include <climits>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace kiln::tools {
namespace {

using distributed::FlightDumpEntry;
using Json = nlohmann::json;

constexpr const char* kStates[] = {"entered", "started", "completed", "failed"};

// A text from a dump as the report shows it: control bytes (C0, DEL, and C1 as UTF-8 writes
// them) and backslashes escaped, so that none reaches the terminal raw.
std::string Shown(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    const bool c1 = c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) < 0xA0;
    if (c == '\\') {
      out += "\\\\";
    } else if (c < 0x20 || c == 0x7F) {
      absl::StrAppend(&out, absl::StrFormat("\\x%02x", c));
    } else if (c1) {
      absl::StrAppend(&out, absl::StrFormat("\\xc2\\x%02x", static_cast<unsigned char>(s[++i])));
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

// The first `n` bytes of a text, back to a UTF-8 character's start.
absl::string_view Prefix(absl::string_view s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

// One member of one rank of a group: its calls, by seq, in calls_.
struct FlightMerge::Member {
  int rank = 0, local = 0;
  size_t begin = 0, end = 0;
};

absl::Status FlightMerge::Add(const std::string& file, distributed::FlightDumpSource read) {
  const size_t begin = calls_.size();
  auto fail = [&](absl::string_view message) {
    calls_.resize(begin);
    return absl::InvalidArgumentError(absl::StrCat(file, ": ", message));
  };
  std::string dims;
  absl::StatusOr<distributed::FlightDump> head =
      distributed::ReadFlightDump(read, [&](const FlightDumpEntry& e) { return AddCall(e, dims); });
  if (!head.ok()) {
    // The reader's own errors say what is wrong with the bytes; the source's and the sink's
    // (a read that failed, too many texts) are not about the format.
    const bool format = head.status().code() == absl::StatusCode::kInvalidArgument;
    return fail(absl::StrCat(format ? "not a flight recorder dump: " : "", head.status().message()));
  }
  const distributed::FlightDump& d = *head;
  if (absl::Status s = CheckJoins(d); !s.ok()) return fail(s.message());
  if (absl::Status s = SortCalls(begin); !s.ok()) return fail(s.message());
  members_ += d.members;
  dumps_.push_back({.file = file,
                    .diagnosis = d.diagnosis,
                    .group = d.group,
                    .rank = d.rank,
                    .world_size = d.world_size,
                    .members = d.members,
                    .begin = begin,
                    .end = calls_.size()});
  return absl::OkStatus();
}

absl::Status FlightMerge::AddCall(const FlightDumpEntry& e, std::string& dims) {
  if (calls_.size() == std::numeric_limits<uint32_t>::max()) {
    return absl::ResourceExhaustedError(absl::StrCat("more than ", calls_.size(), " calls in all"));
  }
  dims.clear();
  absl::StrAppend(&dims, absl::StrJoin(e.shape, ","));
  Call c{
      .seq = e.seq,
      .enqueued_us = e.enqueued_us,
      .started_us = e.started_us,
      .ended_us = e.ended_us,
      .member = static_cast<uint16_t>(e.member),
      .state = static_cast<uint8_t>(std::find(std::begin(kStates), std::end(kStates), e.state) - std::begin(kStates))};
  for (const auto& [text, id] :
       {std::pair{&e.op, &c.op}, std::pair{&e.tag, &c.tag}, std::pair{&e.dtype, &c.dtype},
        std::pair{static_cast<const std::string*>(&dims), &c.dims}, std::pair{&e.error, &c.error}}) {
    absl::StatusOr<uint32_t> got = strings_.Intern(*text);
    if (!got.ok()) return got.status();
    *id = *got;
  }
  calls_.push_back(c);
  return absl::OkStatus();
}

absl::Status FlightMerge::CheckJoins(const distributed::FlightDump& d) const {
  if (members_ + d.members > kMaxMembers) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxMembers,
                                                   " members in all (each dump's rank times its ", d.members,
                                                   " member(s)); merge fewer dumps at a time"));
  }
  for (const Dump& other : dumps_) {
    if (other.group != d.group) continue;
    if (d.world_size != other.world_size || d.members != other.members) {
      return absl::InvalidArgumentError(absl::StrCat("group ", d.group, " of ", d.world_size, " rank(s) x ", d.members,
                                                     " member(s), but ", other.file, " has ", other.world_size, " x ",
                                                     other.members));
    }
    if (d.rank == other.rank) {
      return absl::InvalidArgumentError(
          absl::StrCat("rank ", d.rank, " of group ", d.group, " again (also in ", other.file, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status FlightMerge::SortCalls(size_t begin) {
  const auto first = calls_.begin() + static_cast<std::ptrdiff_t>(begin);
  std::sort(first, calls_.end(),
            [](const Call& a, const Call& b) { return a.member != b.member ? a.member < b.member : a.seq < b.seq; });
  const auto twice = std::adjacent_find(
      first, calls_.end(), [](const Call& a, const Call& b) { return a.member == b.member && a.seq == b.seq; });
  if (twice != calls_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("member ", twice->member, " has seq ", twice->seq, " more than once"));
  }
  return absl::OkStatus();
}

std::string FlightMerge::Signature(const Call& c) const {
  return distributed::FlightSignature(strings_.Get(c.op), strings_.Get(c.tag), strings_.Get(c.dtype),
                                      strings_.Get(c.dims));
}

bool FlightMerge::SameCall(const Call& a, const Call& b) const {
  if (a.op == b.op && a.tag == b.tag && a.dtype == b.dtype && a.dims == b.dims) return true;
  return Signature(a) == Signature(b);  // other texts may still read the same
}

void FlightMerge::Write(int tail, absl::FunctionRef<void(absl::string_view)> out) const {
  std::map<int, std::vector<const Dump*>> groups;
  for (const Dump& d : dumps_) groups[d.group].push_back(&d);
  std::string summary;
  for (auto& [id, ranks] : groups) {
    std::sort(ranks.begin(), ranks.end(), [](const Dump* a, const Dump* b) { return a->rank < b->rank; });
    WriteGroup(id, ranks, tail, out, &summary);
  }
  out(absl::StrCat("{\"dumps\":", dumps_.size(), ",\"groups\":[", summary, "]}\n"));
}

std::string FlightMerge::MemberName(const Member& m, int per_rank) {
  return per_rank == 1 ? absl::StrCat("rank ", m.rank) : absl::StrCat("rank ", m.rank, " member ", m.local);
}

std::vector<FlightMerge::Member> FlightMerge::MembersOf(const std::vector<const Dump*>& dumps) const {
  std::vector<Member> members;
  for (const Dump* d : dumps) {
    size_t at = d->begin;
    for (int m = 0; m < d->members; ++m) {
      Member& member = members.emplace_back(Member{.rank = d->rank, .local = m, .begin = at});
      while (at < d->end && calls_[at].member == m) ++at;
      member.end = at;
    }
  }
  return members;
}

// The first seq at which the members' calls differ. From the first seq every member with calls
// still holds (rings wrap), each seq any member recorded must be the same call on every member.
// The members' calls are walked together, one seq at a time; a seq every member holds moves
// every member on by one.
struct FlightMerge::Divergence {
  uint64_t seq = 0;
  std::vector<std::string> lacking, made;  // "rank 1 has no call (...)", "rank 0 called ..."
  Json calls = Json::object();
};

std::optional<FlightMerge::Divergence> FlightMerge::FirstDivergence(const std::vector<Member>& members, int per_rank,
                                                                    uint64_t start) const {
  std::vector<size_t> at;
  for (const Member& m : members) {
    at.push_back(static_cast<size_t>(std::partition_point(calls_.begin() + m.begin, calls_.begin() + m.end,
                                                          [start](const Call& c) { return c.seq < start; }) -
                                     calls_.begin()));
  }
  while (true) {
    bool any = false;
    uint64_t seq = 0;
    for (size_t i = 0; i < members.size(); ++i) {
      if (at[i] < members[i].end && (!any || calls_[at[i]].seq < seq)) seq = calls_[at[i]].seq, any = true;
    }
    if (!any) return std::nullopt;
    bool same = true;
    for (size_t i = 0; i < members.size() && same; ++i) {
      same = at[i] < members[i].end && calls_[at[i]].seq == seq && SameCall(calls_[at[i]], calls_[at[0]]);
    }
    if (!same) return DivergenceAt(members, per_rank, at, seq);
    for (size_t& a : at) ++a;
  }
}

FlightMerge::Divergence FlightMerge::DivergenceAt(const std::vector<Member>& members, int per_rank,
                                                  const std::vector<size_t>& at, uint64_t seq) const {
  Divergence d{.seq = seq};
  for (size_t i = 0; i < members.size(); ++i) {
    const Member& m = members[i];
    const std::string name = MemberName(m, per_rank);
    if (at[i] == m.end || calls_[at[i]].seq != seq) {
      const std::string last_call =
          m.begin == m.end ? "no call at all"
                           : absl::StrCat("its last is seq ", calls_[m.end - 1].seq, " ", Signature(calls_[m.end - 1]));
      d.lacking.push_back(absl::StrCat(name, " has no call (", Shown(last_call), ")"));
      d.calls[name] = nullptr;
    } else {
      const std::string signature = Signature(calls_[at[i]]);
      d.made.push_back(absl::StrCat(name, " called ", Shown(signature)));
      d.calls[name] = signature;
    }
  }
  return d;
}

// The timeline, by enqueue time (ties in member order): the last `tail` calls (all: tail <= 0).
void FlightMerge::WriteTimeline(const std::vector<const Dump*>& dumps, const std::vector<Member>& members, int per_rank,
                                int tail, absl::FunctionRef<void(absl::string_view)> out) const {
  std::vector<uint32_t> order;
  for (const Member& m : members) {
    for (size_t i = m.begin; i < m.end; ++i) order.push_back(static_cast<uint32_t>(i));
  }
  std::stable_sort(order.begin(), order.end(), [this](uint32_t a, uint32_t b) {
    const Call &x = calls_[a], &y = calls_[b];
    return x.enqueued_us != y.enqueued_us ? x.enqueued_us < y.enqueued_us : x.seq < y.seq;
  });
  const int64_t t0 = order.empty() ? 0 : calls_[order.front()].enqueued_us;
  const size_t from = tail > 0 && order.size() > static_cast<size_t>(tail) ? order.size() - tail : 0;
  if (from > 0) out(absl::StrCat("  ... ", from, " earlier call(s)\n"));
  // Whose a call is: the rank of the dump whose calls hold it (dumps by where their calls start).
  std::vector<std::pair<size_t, int>> starts;
  for (const Dump* d : dumps) {
    if (d->begin != d->end) starts.push_back({d->begin, d->rank});
  }
  std::sort(starts.begin(), starts.end());
  std::string line;
  for (size_t i = from; i < order.size(); ++i) {
    const Call& c = calls_[order[i]];
    const auto owner =
        std::prev(std::upper_bound(starts.begin(), starts.end(), std::pair<size_t, int>{order[i], INT_MAX}));
    const Member m{.rank = owner->second, .local = c.member};
    const double took = c.ended_us > 0 ? (c.ended_us - c.enqueued_us) / 1000.0 : -1;
    const absl::string_view error = strings_.Get(c.error);
    line.clear();
    absl::StrAppend(&line,
                    absl::StrFormat("  %+12.3f ms  %-18s seq %-8d %-10s", (c.enqueued_us - t0) / 1000.0,
                                    MemberName(m, per_rank), c.seq, kStates[c.state]),
                    took >= 0 ? absl::StrFormat(" %9.3f ms  ", took) : std::string("       ... ms  "),
                    Shown(Signature(c)), error.empty() ? "" : absl::StrCat("  [", Shown(Prefix(error, 200)), "]"),
                    "\n");
    out(line);
  }
}

void FlightMerge::WriteGroup(int id, const std::vector<const Dump*>& dumps, int tail,
                             absl::FunctionRef<void(absl::string_view)> out, std::string* summary) const {
  const int world_size = dumps.front()->world_size, per_rank = dumps.front()->members;
  const std::vector<Member> members = MembersOf(dumps);
  std::vector<int> ranks, missing;
  for (const Dump* d : dumps) ranks.push_back(d->rank);
  for (int r = 0, i = 0; r < world_size && missing.size() < 64; ++r) {
    while (i < static_cast<int>(ranks.size()) && ranks[i] < r) ++i;
    if (i == static_cast<int>(ranks.size()) || ranks[i] != r) missing.push_back(r);
  }
  std::string head = absl::StrCat("group ", id, ": dumps of rank(s) ", absl::StrJoin(ranks, ", "), " of ", world_size,
                                  ", ", per_rank, " member(s) each");
  if (!missing.empty())
    absl::StrAppend(&head, "; no dump from rank(s) ", absl::StrJoin(missing, ", "), " (stopped, hung or gone?)");
  head += "\n";
  for (const Dump* d : dumps) {
    if (!d->diagnosis.empty()) absl::StrAppend(&head, "  rank ", d->rank, " saw: ", Shown(d->diagnosis), "\n");
  }
  out(head);

  uint64_t start = 0, last = 0;
  bool any_calls = false;
  for (const Member& m : members) {
    if (m.begin == m.end) continue;
    any_calls = true;
    start = std::max(start, calls_[m.begin].seq);
    last = std::max(last, calls_[m.end - 1].seq);
  }
  std::optional<Divergence> divergence = FirstDivergence(members, per_rank, start);
  WriteTimeline(dumps, members, per_rank, tail, out);
  Json first_divergence = nullptr;
  if (divergence) {
    first_divergence = Json{{"seq", divergence->seq},
                            {"kind", divergence->lacking.empty() ? "different" : "missing"},
                            {"calls", divergence->calls}};
    std::vector<std::string> named = divergence->lacking;
    named.insert(named.end(), divergence->made.begin(), divergence->made.end());
    out(absl::StrCat("first divergence: seq ", divergence->seq, ": ", absl::StrJoin(named, "; "), "\n"));
  } else {
    out(!any_calls ? "no calls recorded\n"
                   : absl::StrCat("no divergence: every member recorded the same calls from seq ", start, " to ", last,
                                  missing.empty() ? "" : " (ranks without a dump unknown)", "\n"));
  }
  if (!summary->empty()) *summary += ",";
  *summary += Json{{"group", id},    {"world_size", world_size}, {"members", per_rank},
                   {"ranks", ranks}, {"missing_ranks", missing}, {"first_divergence", first_divergence}}
                  .dump(-1, ' ', false, Json::error_handler_t::replace);
}

}  // namespace kiln::tools
