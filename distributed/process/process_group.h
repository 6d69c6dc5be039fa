// ProcessGroup: the cross-process stage of a device group. `world_size` processes, each
// driving a DeviceGroup of local devices, join one process group; a collective over the world
// reduces over each process's local devices first, then runs the process group's collective
// on the staged buffer, then hands the result back to every local device
// (distributed/device_group.h).
//
// An engine implements this interface on host buffers: Gloo over TCP
// (distributed/gloo/gloo_process_group.h). CUDA device groups use a process group differently:
// to meet, to agree on each call and to hand out NCCL's unique id (Agree, Broadcast), while
// NCCL moves the data between every GPU of every process (distributed/nccl/nccl_engine.h).
//
// Every rank must make the same calls in the same order (as with NCCL or torch.distributed).
// Each call is compared across the ranks before any of its data reaches a tensor. After a
// failed collective (a peer gone, a timeout) the process group is unusable: every later call
// returns the same status.
#ifndef KILN_DISTRIBUTED_PROCESS_PROCESS_GROUP_H_
#define KILN_DISTRIBUTED_PROCESS_PROCESS_GROUP_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "tensor/dtype.h"
#include "tensor/ops.h"

namespace kiln::distributed {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  virtual int rank() const = 0;
  virtual int world_size() const = 0;
  virtual const char* engine() const = 0;  // "gloo"
  // The deadline of every call.
  virtual std::chrono::milliseconds timeout() const = 0;

  // Compares `call` across the ranks and moves nothing else: InvalidArgument on every rank
  // if they differ (as below); a deadline like every collective.
  virtual absl::Status Agree(absl::string_view call) = 0;

  // Every collective first compares `call` (op, tag, dtype, shape, local device count) across
  // the ranks: if they differ, InvalidArgument on every rank, naming the first rank that
  // differs from rank 0 and both calls, and nothing else is exchanged. Arguments are checked
  // after that, so every rank reports the same error.

  // Buffers are host memory.
  // out = reduce(in) over the ranks, element-wise (kSum, kMax or kMin; kMean is a kSum the
  // caller divides). `in` may equal `out`. Every rank gets the same bits.
  virtual absl::Status AllReduce(absl::string_view call, const void* in, void* out, int64_t count, DType dtype,
                                 ReduceOp kind) = 0;
  // data = root's data, on every rank (the root's buffer is only read).
  virtual absl::Status Broadcast(absl::string_view call, void* data, int64_t bytes, int root) = 0;
  // In place: rank r's part is data[r * bytes_per_rank, (r + 1) * bytes_per_rank) on entry;
  // every part is there on return.
  virtual absl::Status AllGather(absl::string_view call, void* data, int64_t bytes_per_rank) = 0;
  // In place: data holds `count` elements on every rank; on return, data[0, count / world)
  // is the reduction of part `rank` (count divides by the world size).
  virtual absl::Status ReduceScatter(absl::string_view call, void* data, int64_t count, DType dtype, ReduceOp kind) = 0;

  // A side channel for diagnostics after a failure, which must not need the group's own
  // connections (a failure may have closed them): leaves `note` for the other ranks under
  // `key` and returns every rank's note under `key` (this rank's included), waiting at most
  // `wait` for those not there yet; a rank that leaves none in time is nullopt. Best effort,
  // never an error. This default has no channel: only this rank's own note.
  virtual std::vector<std::optional<std::string>> ExchangeNotes(const std::string& key, const std::string& note,
                                                                std::chrono::milliseconds wait) {
    (void)key;
    (void)wait;
    std::vector<std::optional<std::string>> notes(world_size());
    notes[rank()] = note;
    return notes;
  }
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_PROCESS_PROCESS_GROUP_H_
