// NcclComm: one rank of an NCCL communicator, on one CUDA device, with its own communication
// stream. A collective waits (by event) for what the compute stream has queued, runs on the
// communication stream, and fences its input and output buffers with an event, so the compute
// stream goes on with other work (backward) while it runs and only ops that use those buffers
// wait for it (see DeviceBuffer::SetFence).
//
// In one process, CreateAll makes a communicator over the given devices; across processes,
// one process calls NewUniqueId and every process passes those bytes to Join with its first
// rank, the world size and its devices (ncclCommInitRankConfig). Every communicator is
// non-blocking, so that joining and every call have a deadline (NCCL itself would wait for a
// peer that never comes for ever) and another thread can abort one that is stuck.
//
// One thread at a time uses a communicator (NCCL's rule): each NcclComm has a mutex that its
// calls, polls and Abort take.
#ifndef KILN_DISTRIBUTED_NCCL_NCCL_COMM_H_
#define KILN_DISTRIBUTED_NCCL_NCCL_COMM_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/cuda/strided_tensor.h"
#include "distributed/collective.h"
#include "tensor/ops.h"

namespace kiln::cuda {

// OK for ncclSuccess; otherwise "<what>: <ncclGetErrorString>" (plus NCCL's last error).
absl::Status NcclStatus(ncclResult_t result, absl::string_view what);

// A collective's dense inputs and fresh outputs, made on the compute streams before any rank
// queues its NCCL call: a rank that runs out of memory fails before, not after, the others
// have queued theirs (they would wait for it until aborted).
struct NcclBuffers {
  std::vector<StridedTensor> inputs, outputs;
};

class NcclComm {
 public:
  // Every rank in this process: Join with a fresh id.
  static absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> CreateAll(const std::vector<CudaDevice>& devices,
                                                                          std::chrono::milliseconds timeout);
  // NCCL_UNIQUE_ID_BYTES opaque bytes naming a new communicator.
  static absl::StatusOr<std::string> NewUniqueId();
  // Ranks first_rank, first_rank + 1, ... of `world` on `devices`, joined together (one NCCL
  // group). DeadlineExceeded when the others have not all joined within `timeout`.
  static absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> Join(absl::string_view unique_id, int first_rank,
                                                                     int world, const std::vector<CudaDevice>& devices,
                                                                     std::chrono::milliseconds timeout);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CudaDevice& device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  // Ends the communicator's queued and running operations (their results are garbage) and
  // frees it; every later Run on it fails. Safe from any thread.
  void Abort();
  bool aborted() const { return aborted_; }
  // NCCL's asynchronous error (e.g. a peer's connection dropped): OK while healthy or busy.
  absl::Status AsyncError() const;

  // The buffers of `op` over `world` ranks for these inputs (one per local rank): InvalidArgument
  // for what NCCL cannot do, ResourceExhausted when a device is out of memory.
  static absl::StatusOr<NcclBuffers> Prepare(distributed::Collective op, const std::vector<StridedTensor>& inputs,
                                             int world, ReduceOp reduce = ReduceOp::kSum);

  // Runs `op` for comms[i] on inputs[i], all in one NCCL group (ncclGroupStart/End), so one
  // thread may drive every rank of an in-process communicator; a per-rank thread passes just
  // its own. Each call returns once its operations are queued (at most the communicator's
  // timeout while a non-blocking communicator connects). Inputs must agree in shape and dtype across ranks (the caller
  // checks). Results:
  //   all-reduce: the reduction (kMean: ncclAvg for floats; integer sums divided, truncating)
  //   broadcast: rank `root`'s tensor; all-gather / reduce-scatter: along dim 0.
  // An error after any call was queued aborts `comms` (the peers' halves of the collective
  // would otherwise wait for ever) and says so.
  static absl::StatusOr<std::vector<StridedTensor>> Run(const std::vector<NcclComm*>& comms, distributed::Collective op,
                                                        const NcclBuffers& buffers, ReduceOp reduce = ReduceOp::kSum,
                                                        int root = 0);
  // Prepare, then Run.
  static absl::StatusOr<std::vector<StridedTensor>> Run(const std::vector<NcclComm*>& comms, distributed::Collective op,
                                                        const std::vector<StridedTensor>& inputs,
                                                        ReduceOp reduce = ReduceOp::kSum, int root = 0);

 private:
  NcclComm(ncclComm_t comm, int rank, int size, CudaDevice device, cudaStream_t stream,
           std::chrono::milliseconds timeout)
      : comm_(comm), rank_(rank), size_(size), device_(device), stream_(stream), timeout_(timeout) {}
  // Communicators comms[i] (rank first_rank + i) with their streams; on failure all are freed.
  static absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> WrapAll(const std::vector<ncclComm_t>& comms,
                                                                        int first_rank, int world,
                                                                        const std::vector<CudaDevice>& devices,
                                                                        std::chrono::milliseconds timeout);
  // Join's steps: its arguments checked; every rank's ncclCommInitRankConfig queued in one
  // NCCL group; the wait (up to `timeout`) until all have connected.
  static absl::Status CheckJoin(absl::string_view unique_id, int first_rank, int world,
                                const std::vector<CudaDevice>& devices);
  static absl::Status StartJoining(const ncclUniqueId& id, int first_rank, int world,
                                   const std::vector<CudaDevice>& devices, const std::string& what,
                                   std::vector<ncclComm_t>& comms);
  static absl::Status AwaitJoined(const std::vector<ncclComm_t>& comms, const std::string& what,
                                  std::chrono::milliseconds timeout);
  // Run's steps (nccl_comm.cc numbers them). InvalidArgument for kGradientSync, which is no call.
  static absl::Status CheckCall(distributed::Collective op);
  // Each communication stream waits (by event) for what its compute stream has queued.
  static absl::Status AwaitCompute(const std::vector<NcclComm*>& comms, const NcclBuffers& buffers);
  // Every rank's call between ncclGroupStart (already called) and ncclGroupEnd; mu_ held.
  static absl::Status IssueGrouped(const std::vector<NcclComm*>& comms, distributed::Collective op,
                                   const NcclBuffers& buffers, ReduceOp reduce, int root);
  // After a failure once calls may be queued: aborts `comms` (`locked`: their mu_ is held),
  // fences the buffers behind what the communication streams still run, and returns `why`
  // saying so.
  static absl::Status AbortAndFence(const std::vector<NcclComm*>& comms, const NcclBuffers& buffers,
                                    const absl::Status& why, bool locked);
  // Later users of the inputs and outputs wait for the collective (an event each).
  static absl::Status FenceBuffers(const std::vector<NcclComm*>& comms, const NcclBuffers& buffers,
                                   std::vector<StridedTensor>& outputs);
  // An integer mean: NCCL summed, the division by the world size follows on the compute stream.
  static absl::Status DivideByWorld(const std::vector<NcclComm*>& comms, DType dtype,
                                    std::vector<StridedTensor>& outputs);
  // Waits while the communicator is busy with a previous call (ncclInProgress), taking mu_
  // for each poll only, so that Abort can get in.
  absl::Status Settle(absl::string_view what) const;
  void AbortLocked();  // mu_ held

  ncclComm_t comm_;
  int rank_, size_;
  CudaDevice device_;
  cudaStream_t stream_;
  std::chrono::milliseconds timeout_;
  std::atomic<bool> aborted_{false};
  mutable std::mutex mu_;
};

}  // namespace kiln::cuda

#endif  // KILN_DISTRIBUTED_NCCL_NCCL_COMM_H_
