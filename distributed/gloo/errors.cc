#include "distributed/gloo/errors.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "distributed/process/rank_list.h"

namespace kiln::distributed {

std::string Reason(const std::exception& e) {
  std::string s = e.what();
  while (!s.empty() && s[0] == '[') {
    const size_t end = s.find("] ");
    if (end == std::string::npos) break;
    s = s.substr(end + 2);
  }
  return s;
}

bool IsTimeout(const std::string& reason) {
  return absl::StrContains(reason, "imeout") || absl::StrContains(reason, "imed out");
}

absl::Status ConnectionError(const std::string& reason, const std::string& message) {
  return IsTimeout(reason) ? absl::DeadlineExceededError(message) : absl::UnavailableError(message);
}

absl::Status BrokenGroupError(int rank, int size, absl::string_view what, std::chrono::milliseconds timeout,
                              const std::string& reason) {
  std::vector<int> others;
  for (int r = 0; r < size; ++r) {
    if (r != rank) others.push_back(r);
  }
  const std::string head = absl::StrCat("process group (gloo, rank ", rank, " of ", size, "): ", what);
  const std::string tail = "; the process group is unusable from now on";
  if (IsTimeout(reason)) {
    return absl::DeadlineExceededError(absl::StrCat(head, " got no answer from rank(s) ", RankList(others), " within ",
                                                    timeout.count(), " ms (", reason, ")", tail));
  }
  return absl::UnavailableError(
      absl::StrCat(head, " lost its connection to rank(s) ", RankList(others), " (", reason, ")", tail));
}

}  // namespace kiln::distributed
