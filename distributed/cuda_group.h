// DeviceGroup<Cuda>: the collectives of DeviceGroup<B> on CUDA devices, through NCCL. Same
// API, same validation and messages; members still meet at a rendezvous first (which checks
// that they call the same collective on the same shapes, with a deadline), then each member's
// NCCL call runs on its device's communication stream, fenced against the compute stream so
// the host thread and the compute stream go on (e.g. with backward) while it runs.
// List calls drive every rank from one thread in one NCCL group.
//
// Across processes (GroupOptions::process_group, e.g. Gloo's) one NCCL communicator spans
// every GPU of every process (global member p * size() + r is NCCL rank p * size() + r), so
// data goes GPU to GPU as NCCL sees best, not through a per-process stage. The process group
// carries only control: NCCL's unique id (a broadcast from rank 0, which also checks that
// every process has as many GPUs in its group), and before every collective an Agree on the
// call, so a mismatched shape or dtype fails on every rank before NCCL moves anything and a
// process that stopped calling gives the others its deadline.
// Every group has a watchdog (nccl_watchdog.h): it aborts the group's communicators when a
// collective outlives the timeout (a peer died mid-call), and so does a call that fails after
// the peers may have queued their halves; the group then reports why on every call. Buffers
// are made before members meet, so running out of memory is an error before anything moves.
// NCCL forbids queueing collectives of two communicators on one device from two threads at
// once: use one CUDA group per set of devices (and per process group) at a time.
// Included by device_group.h under KILN_WITH_CUDA; not to be included directly.
#ifndef KILN_DISTRIBUTED_CUDA_GROUP_H_
#define KILN_DISTRIBUTED_CUDA_GROUP_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nccl_comm.h"
#include "backends/cuda/nccl_watchdog.h"
#include "distributed/process_group.h"
#include "distributed/rendezvous.h"

namespace kiln::distributed {

template <>
class DeviceGroup<Cuda> : public GroupMembership<CudaDevice> {
 public:
  using Device = CudaDevice;
  using P = Cuda::Primitive;

  DeviceGroup(std::vector<Device> devices, GroupOptions options = {})
      : GroupMembership<CudaDevice>(std::move(devices), std::move(options.process_group)),
        rendezvous_(size(), options.timeout),
        refused_(devices_.size()),
        timeout_(options.timeout) {}
  DeviceGroup(const DeviceGroup&) = delete;
  DeviceGroup& operator=(const DeviceGroup&) = delete;

  // ---- Per-device calls ---------------------------------------------------------------------
  absl::StatusOr<Tensor<Cuda>> AllReduce(int rank, const Tensor<Cuda>& t, ReduceOp kind, absl::string_view tag = "") {
    return Member(rank, t, absl::StrCat("all_reduce(", OpName(kind), ")", Describe(t, tag)), cuda::NcclOp::kAllReduce,
                  kind, 0);
  }
  // The consuming form of DeviceGroup<B> (NCCL writes a fresh output either way).
  absl::StatusOr<Tensor<Cuda>> AllReduce(int rank, Tensor<Cuda>&& t, ReduceOp kind, absl::string_view tag = "") {
    const Tensor<Cuda> kept = std::move(t);
    return AllReduce(rank, kept, kind, tag);
  }

  absl::StatusOr<Tensor<Cuda>> Broadcast(int rank, const Tensor<Cuda>& t, int root, absl::string_view tag = "") {
    if (absl::Status s = CheckRoot(root, global_size()); !s.ok()) return s;
    return Member(rank, t, absl::StrCat("broadcast(root ", root, ")", Describe(t, tag)), cuda::NcclOp::kBroadcast,
                  ReduceOp::kSum, root);
  }

  absl::StatusOr<Tensor<Cuda>> AllGather(int rank, const Tensor<Cuda>& t, absl::string_view tag = "") {
    if (absl::Status s = CheckGatherable(t); !s.ok()) return s;
    return Member(rank, t, absl::StrCat("all_gather", Describe(t, tag)), cuda::NcclOp::kAllGather, ReduceOp::kSum, 0);
  }

  absl::StatusOr<Tensor<Cuda>> ReduceScatter(int rank, const Tensor<Cuda>& t, ReduceOp kind,
                                             absl::string_view tag = "") {
    if (absl::Status s = CheckScatterable(t, global_size()); !s.ok()) return s;
    return Member(rank, t, absl::StrCat("reduce_scatter(", OpName(kind), ")", Describe(t, tag)),
                  cuda::NcclOp::kReduceScatter, kind, 0);
  }

  // ---- List calls: tensors[i] lives on member i; one thread, one NCCL group -----------------
  absl::StatusOr<std::vector<Tensor<Cuda>>> AllReduce(absl::Span<const Tensor<Cuda>> ts, ReduceOp kind) {
    return List(ts, absl::StrCat("all_reduce(", OpName(kind), ")"), cuda::NcclOp::kAllReduce, kind, 0,
                [&](int r) { return AllReduce(r, ts[r], kind); });
  }
  absl::StatusOr<std::vector<Tensor<Cuda>>> Broadcast(absl::Span<const Tensor<Cuda>> ts, int root) {
    if (absl::Status s = CheckRoot(root, global_size()); !s.ok()) return s;
    return List(ts, absl::StrCat("broadcast(root ", root, ")"), cuda::NcclOp::kBroadcast, ReduceOp::kSum, root,
                [&](int r) { return Broadcast(r, ts[r], root); });
  }
  absl::StatusOr<std::vector<Tensor<Cuda>>> AllGather(absl::Span<const Tensor<Cuda>> ts) {
    return List(ts, "all_gather", cuda::NcclOp::kAllGather, ReduceOp::kSum, 0,
                [&](int r) { return AllGather(r, ts[r]); });
  }
  absl::StatusOr<std::vector<Tensor<Cuda>>> ReduceScatter(absl::Span<const Tensor<Cuda>> ts, ReduceOp kind) {
    return List(ts, absl::StrCat("reduce_scatter(", OpName(kind), ")"), cuda::NcclOp::kReduceScatter, kind, 0,
                [&](int r) { return ReduceScatter(r, ts[r], kind); });
  }

 private:
  // The communicators, made on first use: CreateAll (a fresh unique id) over the group's
  // devices, or across processes one communicator over every GPU of every process (collective:
  // one thread of each process calls this).
  absl::Status EnsureComms() {
    std::lock_guard lock(comms_mu_);
    if (!comms_.empty() || !comms_status_.ok()) return comms_status_;
    auto made = world_ ? JoinWorld() : cuda::NcclComm::CreateAll(devices_, timeout_);
    if (!made.ok()) {
      comms_status_ = made.status();
      return comms_status_;
    }
    comms_ = *std::move(made);
    std::vector<cuda::NcclComm*> all;
    for (const auto& comm : comms_) all.push_back(comm.get());
    watchdog_ = std::make_unique<cuda::NcclWatchdog>(timeout_, std::move(all));
    return absl::OkStatus();
  }

  absl::StatusOr<std::vector<std::unique_ptr<cuda::NcclComm>>> JoinWorld() {
    // Rank 0's unique id, behind a byte that says whether rank 0 could make one (so that the
    // others fail with its reason's summary instead of waiting out NCCL's deadline).
    std::string id(1 + NCCL_UNIQUE_ID_BYTES, '\0');
    absl::Status made;
    if (world_->rank() == 0) {
      absl::StatusOr<std::string> fresh = cuda::NcclComm::NewUniqueId();
      if (fresh.ok()) {
        id[0] = 1;
        id.replace(1, fresh->size(), *fresh);
      } else {
        made = fresh.status();
      }
    }
    absl::Status sent = world_->Broadcast(absl::StrCat("nccl unique id for ", size(), " CUDA device(s) per process"),
                                          id.data(), static_cast<int64_t>(id.size()), 0);
    if (!sent.ok()) return sent;
    if (!made.ok()) return made;
    if (id[0] != 1) return absl::UnavailableError("rank 0 could not make an NCCL unique id (see its error)");
    return cuda::NcclComm::Join(absl::string_view(id).substr(1), world_->rank() * size(), global_size(), devices_,
                                timeout_);
  }

  // Before NCCL moves data across processes: the communicators exist, every process makes this
  // very call, and the communicators are healthy.
  absl::Status Prepare(const std::string& signature) {
    if (absl::Status s = EnsureComms(); !s.ok()) return s;
    if (absl::Status s = watchdog_->status(); !s.ok()) return s;  // aborted earlier
    if (!world_) return absl::OkStatus();
    if (absl::Status s = world_->Agree(absl::StrCat(signature, " on ", size(), " local device(s)")); !s.ok()) {
      // A mismatch is the caller's error and leaves the group usable; a peer that is gone may
      // leave a previous collective waiting for it on the GPU.
      if (s.code() != absl::StatusCode::kInvalidArgument) watchdog_->Fail(s);
      return s;
    }
    return watchdog_->status();
  }

  // After a collective was queued: it gets the deadline. After a call failed: unless it was
  // refused before anything was queued, the peers may wait for this rank's half, so the whole
  // group is aborted.
  absl::Status Watch(std::vector<cuda::NcclComm*> comms, const std::string& signature) {
    return watchdog_->Watch(comms, signature);
  }
  // Returns what to report: the group's own failure, which names the cause, once there is one
  // (a member whose communicator another's failure aborted would only say "aborted").
  absl::Status FailedRun(const absl::Status& s) {
    if (s.code() == absl::StatusCode::kInvalidArgument || watchdog_ == nullptr) return s;
    watchdog_->Fail(s);
    return watchdog_->status();
  }

  // A member's call: meet the others (same call, same shapes), agree across processes, then
  // its own rank's NCCL op.
  absl::StatusOr<Tensor<Cuda>> Member(int rank, const Tensor<Cuda>& t, const std::string& signature, cuda::NcclOp op,
                                      ReduceOp kind, int root) {
    if (absl::Status s = CheckMember(rank, t, devices_); !s.ok()) return s;
    // Buffers first: a member out of memory stays away (the others' meeting times out) rather
    // than failing after they have queued their halves. One that NCCL cannot serve (a bool
    // sum) still meets the others, who then all get its error and the group stays usable.
    absl::StatusOr<cuda::NcclBuffers> buffers = cuda::NcclComm::Prepare(op, {t.primitive()}, global_size(), kind);
    if (!buffers.ok() && buffers.status().code() != absl::StatusCode::kInvalidArgument) return buffers.status();
    refused_[rank] = buffers.status();
    if (absl::Status s = rendezvous_.Arrive(rank, signature); !s.ok()) return s;
    absl::Status ready = rendezvous_.Together(rank, [&] {
      for (const absl::Status& refusal : refused_) {
        if (!refusal.ok()) return refusal;
      }
      return Prepare(signature);
    });
    absl::StatusOr<std::vector<P>> out = ready.ok()
                                             ? cuda::NcclComm::Run({comms_[rank].get()}, op, *buffers, kind, root)
                                             : absl::StatusOr<std::vector<P>>(ready);
    if (out.ok()) {
      if (absl::Status s = Watch({comms_[rank].get()}, signature); !s.ok()) out = FailedRun(s);
    } else if (ready.ok()) {
      out = FailedRun(out.status());
    }
    // Every member has issued its call before any starts the next round (NCCL needs the
    // same order of collectives on every rank).
    if (absl::Status s = rendezvous_.Depart(rank); !s.ok()) return s;
    if (!out.ok()) return out.status();
    return Tensor<Cuda>((*out)[0]);
  }

  template <class PerMember>
  absl::StatusOr<std::vector<Tensor<Cuda>>> List(absl::Span<const Tensor<Cuda>> ts, const std::string& name,
                                                 cuda::NcclOp op, ReduceOp kind, int root, PerMember per_member) {
    if (static_cast<int>(ts.size()) != size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("a list call needs one tensor per member: got ", ts.size(), " for a group of ", size()));
    }
    bool same = true;
    for (int r = 0; r < size(); ++r) {
      if (absl::Status s = CheckMember(r, ts[r], devices_); !s.ok()) return s;
      same = same && ts[r].shape() == ts[0].shape() && ts[r].dtype() == ts[0].dtype();
    }
    // Mismatched inputs take the per-member path, whose rendezvous names the difference.
    if (!same) return OnEveryMember<Tensor<Cuda>>(size(), ts.size(), per_member);
    if (op == cuda::NcclOp::kAllGather) {
      if (absl::Status s = CheckGatherable(ts[0]); !s.ok()) return s;
    }
    if (op == cuda::NcclOp::kReduceScatter) {
      if (absl::Status s = CheckScatterable(ts[0], global_size()); !s.ok()) return s;
    }
    // The per-member signature, so that processes may mix list and per-member calls.
    const std::string signature = absl::StrCat(name, Describe(ts[0], ""));
    std::vector<P> inputs;
    for (int r = 0; r < size(); ++r) inputs.push_back(ts[r].primitive());
    absl::StatusOr<cuda::NcclBuffers> buffers = cuda::NcclComm::Prepare(op, inputs, global_size(), kind);
    if (!buffers.ok()) return buffers.status();
    if (absl::Status s = Prepare(signature); !s.ok()) return s;
    std::vector<cuda::NcclComm*> comms;
    for (int r = 0; r < size(); ++r) comms.push_back(comms_[r].get());
    auto out = cuda::NcclComm::Run(comms, op, *buffers, kind, root);
    if (!out.ok()) return FailedRun(out.status());
    if (absl::Status s = Watch(comms, signature); !s.ok()) return FailedRun(s);
    std::vector<Tensor<Cuda>> result;
    for (P& p : *out) result.emplace_back(std::move(p));
    return result;
  }

  Rendezvous rendezvous_;
  std::vector<absl::Status> refused_;  // member r's call refused before the round (its own write)
  const std::chrono::milliseconds timeout_;
  std::mutex comms_mu_;
  absl::Status comms_status_;
  std::vector<std::unique_ptr<cuda::NcclComm>> comms_;
  std::unique_ptr<cuda::NcclWatchdog> watchdog_;  // across processes; destroyed before comms_
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_CUDA_GROUP_H_
