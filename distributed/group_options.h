// What a device group is made with, and the one-thread-per-member runner its list calls use
// (shared by the group's front end and its engines).
#ifndef KILN_DISTRIBUTED_GROUP_OPTIONS_H_
#define KILN_DISTRIBUTED_GROUP_OPTIONS_H_

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "distributed/process/process_group.h"

namespace kiln::distributed {

struct GroupOptions {
  // How long a member waits for the others at each meeting before the group gives up.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  // Set: this group is one process's part of a world (distributed/process/process_group.h). Its collectives then
  // run over every member of every process: global member p * size() + r is local member r
  // of rank p, every process must have the same number of local devices, and roots and
  // reduce-scatter parts count global members.
  std::shared_ptr<ProcessGroup> process_group;
  // The flight recorder (flight_recorder.h): how many of its last calls each member keeps
  // (0: off), and the folder a failure dumps them to ("": $KILN_FLIGHT_RECORDER_DIR; no dump
  // when that is unset too).
  int flight_recorder_entries = 2048;
  std::string flight_recorder_dir;
};

// Runs call(member) for every member of a group of `size` on a thread of its own (member 0 on
// this one): the results in member order, or the first error.
template <class T, class F>
absl::StatusOr<std::vector<T>> OnEveryMember(int size, size_t given, F call) {
  if (static_cast<int>(given) != size) {
    return absl::InvalidArgumentError(
        absl::StrCat("a list call needs one tensor per member: got ", given, " for a group of ", size));
  }
  std::vector<absl::StatusOr<T>> results(size, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 1; r < size; ++r) threads.emplace_back([&, r] { results[r] = call(r); });
  results[0] = call(0);
  for (auto& t : threads) t.join();
  std::vector<T> out;
  for (auto& r : results) {
    if (!r.ok()) return r.status();
    out.push_back(*std::move(r));
  }
  return out;
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GROUP_OPTIONS_H_
