#include "distributed/process/lead_decision.h"

#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::distributed {

absl::StatusOr<std::string> DecidedByLead(ProcessGroup* group,
                                          const std::function<absl::StatusOr<std::string>()>& decide) {
  if (group == nullptr || group->world_size() == 1) return decide();
  // Two broadcasts: the outcome's code and length, then its text (a value or a message).
  int64_t head[2] = {0, 0};
  std::string text;
  if (group->rank() == 0) {
    absl::StatusOr<std::string> decided = decide();
    if (decided.ok() && static_cast<int64_t>(decided->size()) > kMaxDecisionBytes) {
      decided = absl::InternalError(
          absl::StrCat("rank 0's decision is ", decided->size(), " bytes, more than ", kMaxDecisionBytes));
    }
    text = decided.ok() ? *decided : std::string(decided.status().message().substr(0, kMaxDecisionBytes));
    head[0] = static_cast<int64_t>(decided.status().code());
    head[1] = static_cast<int64_t>(text.size());
  }
  if (absl::Status s = group->Broadcast("rank 0's decision", head, sizeof(head), 0); !s.ok()) return s;
  if (head[0] < 0 || head[0] > 16 || head[1] < 0 || head[1] > kMaxDecisionBytes) {
    return absl::InternalError("rank 0's decision arrived malformed");
  }
  text.resize(head[1]);
  if (head[1] > 0) {
    if (absl::Status s = group->Broadcast("rank 0's decision text", text.data(), head[1], 0); !s.ok()) return s;
  }
  if (head[0] != 0) return absl::Status(static_cast<absl::StatusCode>(head[0]), text);
  return text;
}

}  // namespace kiln::distributed
