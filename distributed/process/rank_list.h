// Ranks as a message names them: all of a few, or the first few and how many more, so that a
// world of a million ranks cannot make a megabyte-long error line.
#ifndef KILN_DISTRIBUTED_PROCESS_RANK_LIST_H_
#define KILN_DISTRIBUTED_PROCESS_RANK_LIST_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"

namespace kiln::distributed {

// "0, 2, 5" or "0, 1, 2, 3, 4, 5, 6, 7 and 992 more".
inline std::string RankList(absl::Span<const int> ranks, size_t shown = 8) {
  if (ranks.size() <= shown) return absl::StrJoin(ranks, ", ");
  return absl::StrCat(absl::StrJoin(ranks.subspan(0, shown), ", "), " and ", ranks.size() - shown, " more");
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_RANK_LIST_H_
