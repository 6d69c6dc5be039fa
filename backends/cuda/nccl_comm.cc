#include "backends/cuda/nccl_comm.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/kernels/kernels.h"
#include "backends/cuda/launch.h"

namespace kiln::cuda {
namespace {

absl::StatusOr<ncclDataType_t> NcclType(DType dtype) {
  switch (dtype) {
    case DType::kF32: return ncclFloat32;
    case DType::kF64: return ncclFloat64;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kBool: return ncclUint8;
  }
  return absl::InvalidArgumentError("unknown dtype");
}

ncclRedOp_t NcclRedOp(NcclReduce reduce, DType dtype) {
  switch (reduce) {
    case NcclReduce::kSum: return ncclSum;
    case NcclReduce::kMean: return IsFloating(dtype) ? ncclAvg : ncclSum;  // ints: sum, divide
    case NcclReduce::kMax: return ncclMax;
    case NcclReduce::kMin: return ncclMin;
  }
  return ncclSum;
}

const char* OpName(NcclOp op) {
  switch (op) {
    case NcclOp::kAllReduce: return "ncclAllReduce";
    case NcclOp::kBroadcast: return "ncclBroadcast";
    case NcclOp::kAllGather: return "ncclAllGather";
    case NcclOp::kReduceScatter: return "ncclReduceScatter";
  }
  return "nccl";
}

DeviceBuffer::Event NewEvent(absl::Status* status, absl::string_view what) {
  cudaEvent_t event = nullptr;
  *status = CudaStatus(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), what);
  if (!status->ok()) return nullptr;
  return DeviceBuffer::Event(event, [](cudaEvent_t e) { cudaEventDestroy(e); });
}

}  // namespace

absl::Status NcclStatus(ncclResult_t result, absl::string_view what) {
  if (result == ncclSuccess) return absl::OkStatus();
  const char* last = ncclGetLastError(nullptr);
  return absl::InternalError(absl::StrCat(what, ": ", ncclGetErrorString(result),
                                          last != nullptr && *last != '\0' ? absl::StrCat(" (", last, ")") : ""));
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::Wrap(ncclComm_t comm, int rank, int size,
                                                         const CudaDevice& device) {
  try {
    Context(device);  // makes the device current
  } catch (const Error& e) {
    ncclCommDestroy(comm);
    return e.status();
  }
  cudaStream_t stream = nullptr;
  if (absl::Status s = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                                  absl::StrCat(device.ToString(), ": communication stream"));
      !s.ok()) {
    ncclCommDestroy(comm);
    return s;
  }
  return std::unique_ptr<NcclComm>(new NcclComm(comm, rank, size, device, stream));
}

absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> NcclComm::CreateAll(
    const std::vector<CudaDevice>& devices) {
  std::vector<int> ids;
  for (const CudaDevice& d : devices) {
    if (absl::Status s = CheckDevice(d); !s.ok()) return s;
    ids.push_back(d.index());
  }
  std::vector<ncclComm_t> comms(devices.size());
  if (absl::Status s = NcclStatus(ncclCommInitAll(comms.data(), static_cast<int>(ids.size()), ids.data()),
                                  "ncclCommInitAll");
      !s.ok()) {
    return s;
  }
  std::vector<std::unique_ptr<NcclComm>> out;
  absl::Status failed;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!failed.ok()) {
      ncclCommDestroy(comms[i]);
      continue;
    }
    auto comm = Wrap(comms[i], static_cast<int>(i), static_cast<int>(devices.size()), devices[i]);
    if (comm.ok()) out.push_back(*std::move(comm));
    else failed = comm.status();
  }
  if (!failed.ok()) return failed;
  return out;
}

absl::StatusOr<std::string> NcclComm::NewUniqueId() {
  ncclUniqueId id;
  if (absl::Status s = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s.ok()) return s;
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::Join(absl::string_view unique_id, int rank,
                                                         int world, const CudaDevice& device) {
  ncclUniqueId id;
  if (unique_id.size() != sizeof(id.internal)) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL unique id: expected ", sizeof(id.internal),
                                                   " bytes, got ", unique_id.size()));
  }
  if (world < 1 || rank < 0 || rank >= world) {
    return absl::InvalidArgumentError(absl::StrCat("NCCL rank ", rank, " is outside a world of ", world));
  }
  if (absl::Status s = CheckDevice(device); !s.ok()) return s;
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  try {
    Context(device);
  } catch (const Error& e) {
    return e.status();
  }
  ncclComm_t comm = nullptr;
  if (absl::Status s = NcclStatus(ncclCommInitRank(&comm, world, id, rank),
                                  absl::StrCat("ncclCommInitRank (rank ", rank, " of ", world, ")"));
      !s.ok()) {
    return s;
  }
  return Wrap(comm, rank, world, device);
}

NcclComm::~NcclComm() {
  cudaSetDevice(device_.index());
  cudaStreamSynchronize(stream_);
  ncclCommDestroy(comm_);
  cudaStreamDestroy(stream_);
}

absl::StatusOr<std::vector<StridedTensor>> NcclComm::Run(const std::vector<NcclComm*>& comms,
                                                         NcclOp op,
                                                         const std::vector<StridedTensor>& inputs,
                                                         NcclReduce reduce, int root) {
  if (comms.size() != inputs.size() || comms.empty()) {
    return absl::InvalidArgumentError("NcclComm::Run: one input per communicator");
  }
  const DType dtype = inputs[0].dtype;
  absl::StatusOr<ncclDataType_t> type = NcclType(dtype);
  if (!type.ok()) return type.status();
  if (dtype == DType::kBool && op != NcclOp::kBroadcast && op != NcclOp::kAllGather &&
      (reduce == NcclReduce::kSum || reduce == NcclReduce::kMean)) {
    return absl::InvalidArgumentError(absl::StrCat(
        OpName(op), ": a bool tensor has no sum or mean; convert it with .to(DType::kI64)"));
  }
  const ncclRedOp_t red = NcclRedOp(reduce, dtype);
  const int world = comms[0]->size();
  std::vector<StridedTensor> staged(comms.size()), outputs(comms.size());
  // 1. On each compute stream: the dense input and a fresh output; then the communication
  //    stream waits for both (an event after them).
  try {
    for (size_t i = 0; i < comms.size(); ++i) {
      const StridedTensor& t = inputs[i];
      DeviceContext& c = Context(comms[i]->device());
      staged[i] = Cuda::contiguous(t);
      Await(c, {&staged[i]});
      Dims dims(t.shape.dims().begin(), t.shape.dims().end());
      if (op == NcclOp::kAllGather) dims[0] *= world;
      if (op == NcclOp::kReduceScatter) dims[0] /= world;
      outputs[i] = StridedTensor::Empty(Shape(dims), dtype, comms[i]->device());
      absl::Status s;
      DeviceBuffer::Event ready = NewEvent(&s, "collective: cudaEventCreate");
      if (!s.ok()) return s;
      ThrowIfCuda(cudaEventRecord(ready.get(), c.stream), "collective: cudaEventRecord");
      ThrowIfCuda(cudaStreamWaitEvent(comms[i]->stream(), ready.get(), 0),
                  "collective: cudaStreamWaitEvent");
    }
  } catch (const Error& e) {
    return e.status();
  }
  // 2. The NCCL calls, grouped.
  absl::Status issued = NcclStatus(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < comms.size() && issued.ok(); ++i) {
    NcclComm& comm = *comms[i];
    const void* in = staged[i].data();
    void* out = outputs[i].mutable_data();
    const size_t count = static_cast<size_t>(staged[i].shape.numel());
    ncclResult_t r = ncclSuccess;
    switch (op) {
      case NcclOp::kAllReduce: r = ncclAllReduce(in, out, count, *type, red, comm.comm_, comm.stream_); break;
      case NcclOp::kBroadcast: r = ncclBroadcast(in, out, count, *type, root, comm.comm_, comm.stream_); break;
      case NcclOp::kAllGather: r = ncclAllGather(in, out, count, *type, comm.comm_, comm.stream_); break;
      case NcclOp::kReduceScatter:
        r = ncclReduceScatter(in, out, count / world, *type, red, comm.comm_, comm.stream_);
        break;
    }
    issued = NcclStatus(r, absl::StrCat(comm.device().ToString(), ": ", OpName(op)));
  }
  const absl::Status ended = NcclStatus(ncclGroupEnd(), "ncclGroupEnd");
  if (!issued.ok()) return issued;
  if (!ended.ok()) return ended;
  // 3. Fences: later users of the input and the output wait for the collective, not sooner.
  try {
    for (size_t i = 0; i < comms.size(); ++i) {
      DeviceContext& c = Context(comms[i]->device());
      absl::Status s;
      DeviceBuffer::Event done = NewEvent(&s, "collective: cudaEventCreate");
      if (!s.ok()) return s;
      ThrowIfCuda(cudaEventRecord(done.get(), comms[i]->stream()), "collective: cudaEventRecord");
      if (staged[i].buffer) staged[i].buffer->SetFence(done);
      if (outputs[i].buffer) outputs[i].buffer->SetFence(done);
      if (reduce == NcclReduce::kMean && !IsFloating(dtype) &&
          (op == NcclOp::kAllReduce || op == NcclOp::kReduceScatter)) {
        Await(c, {&outputs[i]});
        CheckLaunch(kernels::DivideBy(dtype, outputs[i].mutable_data(), outputs[i].shape.numel(),
                                      world, c.stream),
                    "mean", comms[i]->device());
      }
    }
  } catch (const Error& e) {
    return e.status();
  }
  return outputs;
}

}  // namespace kiln::cuda
