#include "distributed/nccl/nccl_comm.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <thread>

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
    // NCCL adds halves pairwise, rounding each partial sum to the half type.
    case DType::kBF16: return ncclBfloat16;
    case DType::kF16: return ncclFloat16;
  }
  return absl::InvalidArgumentError("unknown dtype");
}

ncclRedOp_t NcclRedOp(ReduceOp reduce, DType dtype) {
  switch (reduce) {
    case ReduceOp::kSum: return ncclSum;
    case ReduceOp::kMean: return IsFloating(dtype) ? ncclAvg : ncclSum;  // ints: sum, divide
    case ReduceOp::kMax: return ncclMax;
    case ReduceOp::kMin: return ncclMin;
  }
  return ncclSum;
}

using distributed::Collective;

// The NCCL call of a collective, from its one name: "all_reduce" is "ncclAllReduce".
std::string OpName(Collective op) {
  std::string call = "nccl";
  bool word_start = true;
  for (const char* c = distributed::CollectiveName(op); *c != '\0'; ++c) {
    if (*c == '_') {
      word_start = true;
      continue;
    }
    call += word_start ? static_cast<char>(std::toupper(static_cast<unsigned char>(*c))) : *c;
    word_start = false;
  }
  return call;
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

absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> NcclComm::WrapAll(const std::vector<ncclComm_t>& comms,
                                                                         int first_rank, int world,
                                                                         const std::vector<CudaDevice>& devices,
                                                                         std::chrono::milliseconds timeout) {
  std::vector<std::unique_ptr<NcclComm>> out;
  absl::Status failed;
  for (size_t i = 0; i < comms.size(); ++i) {
    cudaStream_t stream = nullptr;
    if (failed.ok()) {
      try {
        Context(devices[i]);  // makes the device current
        failed = CudaStatus(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                            absl::StrCat(devices[i].ToString(), ": communication stream"));
      } catch (const Error& e) {
        failed = e.status();
      }
    }
    if (failed.ok()) {
      out.push_back(std::unique_ptr<NcclComm>(
          new NcclComm(comms[i], first_rank + static_cast<int>(i), world, devices[i], stream, timeout)));
    } else {
      ncclCommAbort(comms[i]);
    }
  }
  if (!failed.ok()) {
    for (auto& comm : out) comm->Abort();
    return failed;
  }
  return out;
}

absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> NcclComm::CreateAll(const std::vector<CudaDevice>& devices,
                                                                           std::chrono::milliseconds timeout) {
  for (const CudaDevice& d : devices) {
    if (absl::Status s = CheckDevice(d); !s.ok()) return s;
  }
  absl::StatusOr<std::string> id = NewUniqueId();
  if (!id.ok()) return id.status();
  return Join(*id, 0, static_cast<int>(devices.size()), devices, timeout);
}

absl::StatusOr<std::string> NcclComm::NewUniqueId() {
  ncclUniqueId id;
  if (absl::Status s = NcclStatus(ncclGetUniqueId(&id), "ncclGetUniqueId"); !s.ok()) return s;
  return std::string(id.internal, sizeof(id.internal));
}

absl::StatusOr<std::vector<std::unique_ptr<NcclComm>>> NcclComm::Join(absl::string_view unique_id, int first_rank,
                                                                      int world, const std::vector<CudaDevice>& devices,
                                                                      std::chrono::milliseconds timeout) {
  if (absl::Status s = CheckJoin(unique_id, first_rank, world, devices); !s.ok()) return s;
  ncclUniqueId id;
  std::memcpy(id.internal, unique_id.data(), sizeof(id.internal));
  const int n = static_cast<int>(devices.size());
  const std::string what = absl::StrCat("ncclCommInitRankConfig (rank", n == 1 ? " " : "s ", first_rank,
                                        n == 1 ? "" : absl::StrCat("..", first_rank + n - 1), " of ", world, ")");
  std::vector<ncclComm_t> comms(n, nullptr);
  absl::Status joined = StartJoining(id, first_rank, world, devices, what, comms);
  if (joined.ok()) joined = AwaitJoined(comms, what, timeout);
  if (!joined.ok()) {
    for (ncclComm_t c : comms) {
      if (c != nullptr) ncclCommAbort(c);
    }
    return joined;
  }
  return WrapAll(comms, first_rank, world, devices, timeout);
}

absl::Status NcclComm::CheckJoin(absl::string_view unique_id, int first_rank, int world,
                                 const std::vector<CudaDevice>& devices) {
  if (unique_id.size() != sizeof(ncclUniqueId::internal)) {
    return absl::InvalidArgumentError(
        absl::StrCat("NCCL unique id: expected ", sizeof(ncclUniqueId::internal), " bytes, got ", unique_id.size()));
  }
  const int n = static_cast<int>(devices.size());
  if (n == 0) return absl::InvalidArgumentError("NCCL: joining needs at least one device");
  if (world < 1 || first_rank < 0 || first_rank + n > world) {
    return absl::InvalidArgumentError(
        n == 1 ? absl::StrCat("NCCL rank ", first_rank, " is outside a world of ", world)
               : absl::StrCat("NCCL ranks ", first_rank, "..", first_rank + n - 1, " are outside a world of ", world));
  }
  for (const CudaDevice& d : devices) {
    if (absl::Status s = CheckDevice(d); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status NcclComm::StartJoining(const ncclUniqueId& id, int first_rank, int world,
                                    const std::vector<CudaDevice>& devices, const std::string& what,
                                    std::vector<ncclComm_t>& comms) {
  if (absl::Status s = NcclStatus(ncclGroupStart(), "ncclGroupStart"); !s.ok()) return s;
  absl::Status issued;
  for (size_t i = 0; i < devices.size() && issued.ok(); ++i) {
    try {
      Context(devices[i]);
    } catch (const Error& e) {
      issued = e.status();
      break;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    const ncclResult_t r = ncclCommInitRankConfig(&comms[i], world, id, first_rank + static_cast<int>(i), &config);
    if (r != ncclInProgress) issued = NcclStatus(r, what);
  }
  const ncclResult_t ended = ncclGroupEnd();
  if (issued.ok() && ended != ncclInProgress) issued = NcclStatus(ended, what);
  return issued;
}

absl::Status NcclComm::AwaitJoined(const std::vector<ncclComm_t>& comms, const std::string& what,
                                   std::chrono::milliseconds timeout) {
  const auto start = std::chrono::steady_clock::now();
  absl::Status issued;
  for (size_t i = 0; i < comms.size() && issued.ok(); ++i) {
    ncclResult_t state = ncclInProgress;
    while (comms[i] != nullptr && issued.ok()) {
      issued = NcclStatus(ncclCommGetAsyncError(comms[i], &state), what);
      if (state != ncclInProgress) {
        if (issued.ok()) issued = NcclStatus(state, what);
        break;
      }
      if (std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start) > timeout) {
        issued = absl::DeadlineExceededError(
            absl::StrCat(what, ": the other ranks did not all join within ", timeout.count(),
                         " ms (a process failed or was not started, or cannot reach this one)"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  return issued;
}

void NcclComm::Abort() {
  std::lock_guard lock(mu_);
  AbortLocked();
}

void NcclComm::AbortLocked() {
  if (aborted_.exchange(true)) return;
  ncclCommAbort(comm_);
}

absl::Status NcclComm::AsyncError() const {
  std::lock_guard lock(mu_);
  if (aborted_) return absl::FailedPreconditionError(absl::StrCat(device_.ToString(), ": NCCL communicator aborted"));
  ncclResult_t state = ncclSuccess;
  if (absl::Status s = NcclStatus(ncclCommGetAsyncError(comm_, &state), "ncclCommGetAsyncError"); !s.ok()) return s;
  if (state == ncclInProgress) return absl::OkStatus();
  return NcclStatus(state, absl::StrCat(device_.ToString(), ": NCCL (rank ", rank_, " of ", size_, ")"));
}

absl::Status NcclComm::Settle(absl::string_view what) const {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    ncclResult_t state = ncclSuccess;
    {
      std::lock_guard lock(mu_);
      if (aborted_) return absl::FailedPreconditionError(absl::StrCat(what, ": the NCCL communicator was aborted"));
      if (absl::Status s = NcclStatus(ncclCommGetAsyncError(comm_, &state), what); !s.ok()) return s;
    }
    if (state != ncclInProgress) return NcclStatus(state, what);
    // In ms, so that a huge timeout cannot overflow.
    if (std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start) > timeout_) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, ": NCCL was still busy (connecting to its peers?) after ", timeout_.count(), " ms"));
    }
    std::this_thread::yield();
  }
}

NcclComm::~NcclComm() {
  cudaSetDevice(device_.index());
  if (!aborted_) {
    // Let queued work finish (at most the deadline: a peer that is gone leaves it waiting),
    // then abort, which frees an idle communicator as destroy would, without destroy's early
    // return on a communicator in error (which would leak every local rank).
    const auto start = std::chrono::steady_clock::now();
    while (cudaStreamQuery(stream_) == cudaErrorNotReady && AsyncError().ok() &&
           std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start) <=
               timeout_) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    Abort();
  }
  cudaStreamDestroy(stream_);
}

absl::StatusOr<NcclBuffers> NcclComm::Prepare(Collective op, const std::vector<StridedTensor>& inputs, int world,
                                              ReduceOp reduce) {
  if (inputs.empty()) return absl::InvalidArgumentError("NCCL: a collective needs at least one input");
  if (absl::Status s = CheckCall(op); !s.ok()) return s;
  const DType dtype = inputs[0].dtype;
  if (absl::StatusOr<ncclDataType_t> type = NcclType(dtype); !type.ok()) return type.status();
  if (dtype == DType::kBool && op != Collective::kBroadcast && op != Collective::kAllGather &&
      (reduce == ReduceOp::kSum || reduce == ReduceOp::kMean)) {
    return absl::InvalidArgumentError(
        absl::StrCat(OpName(op), ": a bool tensor has no sum or mean; convert it with .to(DType::kI64)"));
  }
  NcclBuffers b;
  try {
    for (const StridedTensor& t : inputs) {
      b.inputs.push_back(Cuda::contiguous(t));
      Dims dims(t.shape.dims().begin(), t.shape.dims().end());
      if (op == Collective::kAllGather) dims[0] *= world;
      if (op == Collective::kReduceScatter) dims[0] /= world;
      b.outputs.push_back(StridedTensor::Empty(Shape(dims), dtype, t.device));
    }
  } catch (const Error& e) {
    return e.status();
  }
  return b;
}

absl::StatusOr<std::vector<StridedTensor>> NcclComm::Run(const std::vector<NcclComm*>& comms, Collective op,
                                                         const std::vector<StridedTensor>& inputs, ReduceOp reduce,
                                                         int root) {
  if (comms.size() != inputs.size() || comms.empty()) {
    return absl::InvalidArgumentError("NcclComm::Run: one input per communicator");
  }
  absl::StatusOr<NcclBuffers> buffers = Prepare(op, inputs, comms[0]->size(), reduce);
  if (!buffers.ok()) return buffers.status();
  return Run(comms, op, *buffers, reduce, root);
}

absl::StatusOr<std::vector<StridedTensor>> NcclComm::Run(const std::vector<NcclComm*>& comms, Collective op,
                                                         const NcclBuffers& buffers, ReduceOp reduce, int root) {
  if (comms.empty() || comms.size() != buffers.inputs.size() || comms.size() != buffers.outputs.size()) {
    return absl::InvalidArgumentError("NcclComm::Run: one input per communicator");
  }
  if (absl::Status s = CheckCall(op); !s.ok()) return s;
  if (absl::StatusOr<ncclDataType_t> type = NcclType(buffers.inputs[0].dtype); !type.ok()) return type.status();
  // 1. Each communication stream waits for what its compute stream has queued (an event).
  if (absl::Status s = AwaitCompute(comms, buffers); !s.ok()) return s;
  // 2. The NCCL calls, grouped, one thread at a time per communicator (locked in address
  //    order, so two calls cannot deadlock, and only around NCCL's calls, so that a thread
  //    blocked on a stream cannot keep the watchdog from aborting). From here on a failure
  //    leaves the peers waiting for this rank's half: the communicators are aborted.
  {
    std::vector<NcclComm*> order = comms;
    std::sort(order.begin(), order.end());
    std::vector<std::unique_lock<std::mutex>> locks;
    for (NcclComm* comm : order) locks.emplace_back(comm->mu_);
    for (NcclComm* comm : comms) {
      if (comm->aborted_) {
        return absl::FailedPreconditionError(
            absl::StrCat(comm->device().ToString(), ": ", OpName(op), ": the NCCL communicator was aborted"));
      }
    }
    if (absl::Status s = NcclStatus(ncclGroupStart(), "ncclGroupStart"); !s.ok()) return s;
    if (absl::Status s = IssueGrouped(comms, op, buffers, reduce, root); !s.ok()) {
      return AbortAndFence(comms, buffers, s, /*locked=*/true);
    }
  }  // polls take the lock one at a time, so that Abort can get in
  // 3. A non-blocking communicator may still be queueing (connecting on first use).
  for (NcclComm* comm : comms) {
    if (absl::Status s = comm->Settle(absl::StrCat(comm->device().ToString(), ": ", OpName(op))); !s.ok()) {
      return AbortAndFence(comms, buffers, s, /*locked=*/false);
    }
  }
  // 4. Fences: later users of the input and the output wait for the collective, not sooner.
  std::vector<StridedTensor> outputs = buffers.outputs;
  if (absl::Status s = FenceBuffers(comms, buffers, outputs); !s.ok()) {
    return AbortAndFence(comms, buffers, s, /*locked=*/false);
  }
  // 5. Integer means: NCCL sums, the division follows on the compute stream.
  if (reduce == ReduceOp::kMean && !IsFloating(buffers.inputs[0].dtype) &&
      (op == Collective::kAllReduce || op == Collective::kReduceScatter)) {
    if (absl::Status s = DivideByWorld(comms, buffers.inputs[0].dtype, outputs); !s.ok()) return s;
  }
  return outputs;
}

absl::Status NcclComm::CheckCall(Collective op) {
  if (op != Collective::kGradientSync) return absl::OkStatus();
  return absl::InvalidArgumentError("NCCL: gradient sync is a group's use, not a collective; run all_reduce");
}

absl::Status NcclComm::AwaitCompute(const std::vector<NcclComm*>& comms, const NcclBuffers& buffers) {
  try {
    for (size_t i = 0; i < comms.size(); ++i) {
      DeviceContext& c = Context(comms[i]->device());
      Await(c, {&buffers.inputs[i]});  // an input still being written by an earlier collective
      absl::Status s;
      DeviceBuffer::Event ready = NewEvent(&s, "collective: cudaEventCreate");
      if (!s.ok()) return s;
      ThrowIfCuda(cudaEventRecord(ready.get(), c.stream), "collective: cudaEventRecord");
      ThrowIfCuda(cudaStreamWaitEvent(comms[i]->stream(), ready.get(), 0), "collective: cudaStreamWaitEvent");
    }
  } catch (const Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

absl::Status NcclComm::IssueGrouped(const std::vector<NcclComm*>& comms, Collective op, const NcclBuffers& buffers,
                                    ReduceOp reduce, int root) {
  const DType dtype = buffers.inputs[0].dtype;
  const ncclDataType_t type = *NcclType(dtype);  // checked by Run
  const ncclRedOp_t red = NcclRedOp(reduce, dtype);
  const int world = comms[0]->size();
  absl::Status issued;
  for (size_t i = 0; i < comms.size() && issued.ok(); ++i) {
    NcclComm& comm = *comms[i];
    const void* in = buffers.inputs[i].data();
    void* out = const_cast<StridedTensor&>(buffers.outputs[i]).mutable_data();
    const size_t count = static_cast<size_t>(buffers.inputs[i].shape.numel());
    ncclResult_t r = ncclSuccess;
    switch (op) {
      case Collective::kAllReduce: r = ncclAllReduce(in, out, count, type, red, comm.comm_, comm.stream_); break;
      case Collective::kBroadcast: r = ncclBroadcast(in, out, count, type, root, comm.comm_, comm.stream_); break;
      case Collective::kAllGather: r = ncclAllGather(in, out, count, type, comm.comm_, comm.stream_); break;
      case Collective::kReduceScatter:
        r = ncclReduceScatter(in, out, count / world, type, red, comm.comm_, comm.stream_);
        break;
      case Collective::kGradientSync: r = ncclInvalidArgument; break;  // refused by CheckCall
    }
    if (r != ncclInProgress) issued = NcclStatus(r, absl::StrCat(comm.device().ToString(), ": ", OpName(op)));
  }
  const ncclResult_t end = ncclGroupEnd();
  if (issued.ok() && end != ncclInProgress) issued = NcclStatus(end, "ncclGroupEnd");
  return issued;
}

absl::Status NcclComm::AbortAndFence(const std::vector<NcclComm*>& comms, const NcclBuffers& buffers,
                                     const absl::Status& why, bool locked) {
  // An aborted kernel may still write before it exits: buffers that cannot be fenced behind
  // the communication streams are kept for good rather than handed back to the allocator.
  for (NcclComm* comm : comms) locked ? comm->AbortLocked() : comm->Abort();
  for (size_t i = 0; i < comms.size(); ++i) {
    absl::Status s;
    DeviceBuffer::Event after = NewEvent(&s, "collective: cudaEventCreate");
    if (s.ok()) s = CudaStatus(cudaEventRecord(after.get(), comms[i]->stream()), "collective: cudaEventRecord");
    for (const StridedTensor* t : {&buffers.inputs[i], &buffers.outputs[i]}) {
      if (!t->buffer) continue;
      if (s.ok()) {
        t->buffer->SetFence(after);
      } else {
        static auto* kept = new std::vector<std::shared_ptr<DeviceBuffer>>;  // never freed, on purpose
        static std::mutex kept_mu;
        std::lock_guard lock(kept_mu);
        kept->push_back(t->buffer);
      }
    }
  }
  return absl::Status(why.code(), absl::StrCat(why.message(), "; the NCCL communicators were aborted"));
}

absl::Status NcclComm::FenceBuffers(const std::vector<NcclComm*>& comms, const NcclBuffers& buffers,
                                    std::vector<StridedTensor>& outputs) {
  std::vector<DeviceBuffer::Event> done(comms.size());
  for (size_t i = 0; i < comms.size(); ++i) {
    absl::Status s;
    done[i] = NewEvent(&s, "collective: cudaEventCreate");
    if (s.ok()) s = CudaStatus(cudaEventRecord(done[i].get(), comms[i]->stream()), "collective: cudaEventRecord");
    if (!s.ok()) return s;
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    if (buffers.inputs[i].buffer) buffers.inputs[i].buffer->SetFence(done[i]);
    if (outputs[i].buffer) outputs[i].buffer->SetFence(done[i]);
  }
  return absl::OkStatus();
}

absl::Status NcclComm::DivideByWorld(const std::vector<NcclComm*>& comms, DType dtype,
                                     std::vector<StridedTensor>& outputs) {
  const int world = comms[0]->size();
  try {
    for (size_t i = 0; i < comms.size(); ++i) {
      DeviceContext& c = Context(comms[i]->device());
      Await(c, {&outputs[i]});
      CheckLaunch(kernels::DivideBy(dtype, outputs[i].mutable_data(), outputs[i].shape.numel(), world, c.stream),
                  "mean", comms[i]->device());
    }
  } catch (const Error& e) {
    return e.status();
  }
  return absl::OkStatus();
}

}  // namespace kiln::cuda
