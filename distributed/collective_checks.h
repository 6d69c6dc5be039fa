// The argument checks and call descriptions of the DeviceGroup<B> front end and its engines,
// so that every backend rejects the same input with the same message and describes a call the
// same way: across processes those descriptions are compared, so they must not depend on the
// backend.
#ifndef KILN_DISTRIBUTED_COLLECTIVE_CHECKS_H_
#define KILN_DISTRIBUTED_COLLECTIVE_CHECKS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tensor/tensor.h"

namespace kiln::distributed {

// " 'tag' of f32[4, 2]": what follows the op's name in a call's signature.
template <Backend B>
std::string Describe(const Tensor<B>& t, absl::string_view tag) {
  return absl::StrCat(tag.empty() ? "" : absl::StrCat(" '", tag, "'"), " of ", DTypeName(t.dtype()),
                      t.shape().ToString());
}

// `member` is a local member and its tensor lives on that member's device.
template <Backend B>
absl::Status CheckMember(int member, const Tensor<B>& t, const std::vector<typename B::Device>& devices) {
  if (member < 0 || member >= static_cast<int>(devices.size())) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", member, " is not a member of a group of ", devices.size()));
  }
  if (!(t.device() == devices[member])) {
    return absl::InvalidArgumentError(absl::StrCat("member ", member, " is ", devices[member].ToString(),
                                                   " but its tensor ", t.Describe(),
                                                   " is not; move it with .to(device)"));
  }
  return absl::OkStatus();
}

inline absl::Status CheckRoot(int root, int members) {
  if (root >= 0 && root < members) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("broadcast: root ", root, " is not a member of a group of ", members));
}

template <Backend B>
absl::Status CheckGatherable(const Tensor<B>& t) {
  if (t.rank() > 0) return absl::OkStatus();
  return absl::InvalidArgumentError("all_gather: needs a tensor of rank >= 1");
}

// Dim 0 splits into one equal part per member.
template <Backend B>
absl::Status CheckScatterable(const Tensor<B>& t, int members) {
  if (t.rank() > 0 && t.size(0) % members == 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("reduce_scatter: dim 0 of ", t.Describe(), " must divide into ", members, " equal parts"));
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_COLLECTIVE_CHECKS_H_
