// Who a device group's members are: its devices in this process and, with a process group,
// their places among every member of every process (global member p * size() + r is local
// member r of rank p). Shared by the group front end and its engines.
#ifndef KILN_DISTRIBUTED_GROUP_MEMBERSHIP_H_
#define KILN_DISTRIBUTED_GROUP_MEMBERSHIP_H_

#include <memory>
#include <vector>

#include "distributed/process/process_group.h"

namespace kiln::distributed {

template <class Device>
class GroupMembership {
 public:
  GroupMembership(std::vector<Device> devices, std::shared_ptr<ProcessGroup> world)
      : devices_(std::move(devices)), world_(std::move(world)) {}

  // Members in this process.
  int size() const { return static_cast<int>(devices_.size()); }
  const std::vector<Device>& devices() const { return devices_; }
  // Processes, and members over all of them (size() when there is no process group).
  int processes() const { return world_ ? world_->world_size() : 1; }
  int global_size() const { return size() * processes(); }
  // The global index of local member `member`.
  int global_rank(int member) const { return (world_ ? world_->rank() * size() : 0) + member; }
  const std::shared_ptr<ProcessGroup>& process_group() const { return world_; }

 protected:
  const std::vector<Device> devices_;
  const std::shared_ptr<ProcessGroup> world_;  // the other processes, if any
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GROUP_MEMBERSHIP_H_
