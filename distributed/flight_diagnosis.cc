#include "distributed/flight_diagnosis.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::distributed {
namespace {

// Parties sharing one place, in the order they were given.
struct Cluster {
  std::vector<int> who;
  const FlightPosition* where;
};

std::string Who(const std::vector<int>& who, const char* noun) {
  return absl::StrCat(noun, who.size() > 1 ? "s " : " ", absl::StrJoin(who, ", "));
}

// Clusters of `parties` for which same(a, b) holds.
template <class Same>
std::vector<Cluster> Clusters(const std::vector<const FlightPosition*>& parties, Same same) {
  std::vector<Cluster> out;
  for (const FlightPosition* p : parties) {
    auto it = std::find_if(out.begin(), out.end(), [&](const Cluster& c) { return same(*c.where, *p); });
    if (it == out.end()) {
      out.push_back({{p->index}, p});
    } else {
      it->who.push_back(p->index);
    }
  }
  return out;
}

}  // namespace

std::string DiagnoseFlight(const std::vector<FlightPosition>& parties, const char* noun,
                           std::chrono::milliseconds silent_wait) {
  std::vector<const FlightPosition*> silent, none, called;
  uint64_t lead = 0;
  for (const FlightPosition& p : parties) {
    if (p.kind == FlightPosition::kSilent) silent.push_back(&p);
    if (p.kind == FlightPosition::kNoCall) none.push_back(&p);
    if (p.kind == FlightPosition::kCalled) {
      called.push_back(&p);
      lead = std::max(lead, p.seq);
    }
  }
  std::vector<std::string> parts;
  std::vector<int> ids;
  for (const FlightPosition* p : silent) ids.push_back(p->index);
  if (!ids.empty()) {
    parts.push_back(
        absl::StrCat(Who(ids, noun), " did not report within ", silent_wait.count(), " ms (stopped, hung or gone)"));
  }
  ids.clear();
  for (const FlightPosition* p : none) ids.push_back(p->index);
  if (!ids.empty()) parts.push_back(absl::StrCat(Who(ids, noun), ids.size() > 1 ? " have" : " has", " made no call"));
  const bool anyone_behind = !silent.empty() || !none.empty() ||
                             std::any_of(called.begin(), called.end(), [&](auto* p) { return p->seq < lead; });
  std::vector<const FlightPosition*> behind, ahead;
  for (const FlightPosition* p : called) (p->seq < lead ? behind : ahead).push_back(p);
  std::stable_sort(behind.begin(), behind.end(), [](auto* a, auto* b) { return a->seq < b->seq; });
  // The state of those behind says whether they finished their last call; those at the lead are
  // in it (or just failed it, which depends on timing, so it is left out).
  for (const Cluster& c : Clusters(behind, [](const FlightPosition&a, const FlightPosition&b) {
         return a.seq == b.seq && a.call == b.call && a.state == b.state;
       })) {
    parts.push_back(absl::StrCat(Who(c.who, noun), " last entered ", c.where->call, " (seq ", c.where->seq, ", ",
                                 c.where->state, ")"));
  }
  const std::vector<Cluster> leads = Clusters(ahead, [](const FlightPosition& a, const FlightPosition& b) {
    return a.signature == b.signature && (a.state == "completed") == (b.state == "completed");
  });
  bool differ = false;
  for (const Cluster& c : leads) differ = differ || c.where->signature != leads[0].where->signature;
  for (const Cluster& c : leads) {
    const bool many = c.who.size() > 1;
    const std::string& call = differ ? c.where->signature : c.where->call;
    if (c.where->state == "completed") {
      parts.push_back(absl::StrCat(Who(c.who, noun), " last entered ", call, " (seq ", c.where->seq, ", completed)"));
    } else if (anyone_behind) {
      parts.push_back(
          absl::StrCat(Who(c.who, noun), many ? " are" : " is", " waiting in ", call, " (seq ", c.where->seq, ")"));
    } else {
      parts.push_back(absl::StrCat(Who(c.who, noun), many ? " are" : " is", " in ", call, " (seq ", c.where->seq, ")"));
    }
  }
  if (parts.empty()) return absl::StrCat("no ", noun, " has made a call");
  return absl::StrJoin(parts, "; ");
}

}  // namespace kiln::distributed
