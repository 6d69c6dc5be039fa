// NcclComm: one rank of an NCCL communicator, on one CUDA device, with its own communication
// stream. A collective waits (by event) for what the compute stream has queued, runs on the
// communication stream, and fences its input and output buffers with an event, so the compute
// stream goes on with other work (backward) while it runs and only ops that use those buffers
// wait for it (see DeviceBuffer::SetFence).
//
// In one process, CreateAll makes a communicator per device (ncclCommInitAll); across
// processes, one process calls NewUniqueId and every process passes those bytes to Join with
// its rank and the world size (ncclCommInitRank).
#ifndef KILN_BACKENDS_CUDA_NCCL_COMM_H_
#define KILN_BACKENDS_CUDA_NCCL_COMM_H_

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "backends/cuda/strided_tensor.h"

namespace kiln::cuda {

// OK for ncclSuccess; otherwise "<what>: <ncclGetErrorString>" (plus NCCL's last error).
absl::Status NcclStatus(ncclResult_t result, absl::string_view what);

enum class NcclOp { kAllReduce, kBroadcast, kAllGather, kReduceScatter };
enum class NcclReduce { kSum, kMean, kMax, kMin };

class NcclComm {
 public:
  static absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> CreateAll(
      const std::vector<CudaDevice>& devices);
  // NCCL_UNIQUE_ID_BYTES opaque bytes naming a new communicator.
  static absl::StatusOr<std::string> NewUniqueId();
  static absl::StatusOr<std::unique_ptr<NcclComm>> Join(absl::string_view unique_id, int rank,
                                                       int world, const CudaDevice& device);
  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  const CudaDevice& device() const { return device_; }
  cudaStream_t stream() const { return stream_; }

  // Runs `op` for comms[i] on inputs[i], all in one NCCL group (ncclGroupStart/End), so one
  // thread may drive every rank of an in-process communicator; a per-rank thread passes just
  // its own. Inputs must agree in shape and dtype across ranks (the caller checks). Results:
  //   all-reduce: the reduction (kMean: ncclAvg for floats; integer sums divided, truncating)
  //   broadcast: rank `root`'s tensor; all-gather / reduce-scatter: along dim 0.
  static absl::StatusOr<std::vector<StridedTensor>> Run(const std::vector<NcclComm*>& comms,
                                                        NcclOp op,
                                                        const std::vector<StridedTensor>& inputs,
                                                        NcclReduce reduce = NcclReduce::kSum,
                                                        int root = 0);

 private:
  NcclComm(ncclComm_t comm, int rank, int size, CudaDevice device, cudaStream_t stream)
      : comm_(comm), rank_(rank), size_(size), device_(device), stream_(stream) {}
  static absl::StatusOr<std::unique_ptr<NcclComm>> Wrap(ncclComm_t comm, int rank, int size,
                                                        const CudaDevice& device);

  ncclComm_t comm_;
  int rank_, size_;
  CudaDevice device_;
  cudaStream_t stream_;
};

}  // namespace kiln::cuda

#endif  // KILN_BACKENDS_CUDA_NCCL_COMM_H_
