// The NCCL engine of a CUDA device group: members still meet in process first (which checks
// that they make the same call on the same shapes, with a deadline), then each member's NCCL
// call runs on its device's communication stream, fenced against the compute stream so the
// host thread and the compute stream go on (e.g. with backward) while it runs. A list call
// drives every member from one thread in one NCCL group.
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
// It registers itself as the engine of Cuda (EngineOf, at the end).
#ifndef KILN_DISTRIBUTED_NCCL_NCCL_ENGINE_H_
#define KILN_DISTRIBUTED_NCCL_NCCL_ENGINE_H_

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#include "distributed/collective_call.h"
#include "distributed/engine.h"
#include "distributed/group_membership.h"
#include "distributed/group_options.h"
#include "distributed/meeting.h"
#include "distributed/nccl/nccl_comm.h"
#include "distributed/nccl/nccl_watchdog.h"

namespace kiln::distributed {

class NcclEngine {
 public:
  using P = Cuda::Primitive;

  // `members` outlives the engine (the group holds both).
  NcclEngine(const GroupMembership<CudaDevice>& members, const GroupOptions& options)
      : m_(members), meeting_(members.size(), options.timeout), refused_(members.size()), timeout_(options.timeout) {}

  // A member's call: meet the others (same call, same shapes), agree across processes, then
  // its own rank's NCCL op (NCCL writes a fresh output whether or not t was consumed).
  absl::StatusOr<Tensor<Cuda>> Run(int member, const Tensor<Cuda>& t, const CollectiveCall& call, bool /*consumed*/) {
    if (absl::Status s = RefusedDuringCapture(m_.devices()[member]); !s.ok()) return s;
    // Buffers first: a member out of memory stays away (the others' meeting times out) rather
    // than failing after they have queued their halves. One that NCCL cannot serve (a bool
    // sum) still meets the others, who then all get its error and the group stays usable.
    absl::StatusOr<cuda::NcclBuffers> buffers =
        cuda::NcclComm::Prepare(call.collective, {t.primitive()}, m_.global_size(), call.op);
    if (!buffers.ok() && buffers.status().code() != absl::StatusCode::kInvalidArgument) return buffers.status();
    refused_[member] = buffers.status();
    if (absl::Status s = meeting_.Arrive(member, call.signature); !s.ok()) return s;
    call.Started();
    absl::Status ready = meeting_.Together(member, [&] {
      for (const absl::Status& refusal : refused_) {
        if (!refusal.ok()) return refusal;
      }
      return Prepare(call);
    });
    absl::StatusOr<std::vector<P>> out =
        ready.ok() ? cuda::NcclComm::Run({comms_[member].get()}, call.collective, *buffers, call.op, call.root)
                   : absl::StatusOr<std::vector<P>>(ready);
    if (out.ok()) {
      if (absl::Status s = watchdog_->Watch({comms_[member].get()}, call.signature); !s.ok()) out = FailedRun(s);
    } else if (ready.ok()) {
      out = FailedRun(out.status());
    }
    // Every member has issued its call before any starts the next round (NCCL needs the
    // same order of collectives on every rank).
    if (absl::Status s = meeting_.Depart(member); !s.ok()) return s;
    if (!out.ok()) return out.status();
    return Tensor<Cuda>((*out)[0]);
  }

  // A list call (ts[i] on member i, checked by the group): one thread, one NCCL group, with
  // the per-member signature, so that processes may mix list and per-member calls. Inputs
  // that differ in shape or dtype take the per-member path, whose meeting names the difference.
  template <class PerMember>
  absl::StatusOr<std::vector<Tensor<Cuda>>> RunList(absl::Span<const Tensor<Cuda>> ts, Collective collective,
                                                    ReduceOp op, int root, PerMember per_member) {
    bool same = true;
    for (const Tensor<Cuda>& t : ts) same = same && t.shape() == ts[0].shape() && t.dtype() == ts[0].dtype();
    if (!same) return OnEveryMember<Tensor<Cuda>>(m_.size(), ts.size(), per_member);
    for (const CudaDevice& device : m_.devices()) {
      if (absl::Status s = RefusedDuringCapture(device); !s.ok()) return s;
    }
    if (collective == Collective::kAllGather) {
      if (absl::Status s = CheckGatherable(ts[0]); !s.ok()) return s;
    }
    if (collective == Collective::kReduceScatter) {
      if (absl::Status s = CheckScatterable(ts[0], m_.global_size()); !s.ok()) return s;
    }
    const CollectiveCall call = MakeCall(collective, op, root, ts[0], "");
    std::vector<P> inputs;
    for (const Tensor<Cuda>& t : ts) inputs.push_back(t.primitive());
    absl::StatusOr<cuda::NcclBuffers> buffers = cuda::NcclComm::Prepare(collective, inputs, m_.global_size(), op);
    if (!buffers.ok()) return buffers.status();
    if (absl::Status s = Prepare(call); !s.ok()) return s;
    std::vector<cuda::NcclComm*> comms;
    for (int r = 0; r < m_.size(); ++r) comms.push_back(comms_[r].get());
    auto out = cuda::NcclComm::Run(comms, collective, *buffers, op, root);
    if (!out.ok()) return FailedRun(out.status());
    if (absl::Status s = watchdog_->Watch(comms, call.signature); !s.ok()) return FailedRun(s);
    std::vector<Tensor<Cuda>> result;
    for (P& p : *out) result.emplace_back(std::move(p));
    return result;
  }

 private:
  // A collective's meeting, agreement across processes and watchdog are host work per call,
  // which a replay of a CUDA graph would skip (distributed/captured_step.h captures only
  // groups of one device, which make no collective).
  static absl::Status RefusedDuringCapture(const CudaDevice& device) {
    return cuda::CaptureRefusal(cuda::Lookup(device), "an NCCL collective (its meeting, agreement and watchdog)");
  }

  // The communicators, made on first use: CreateAll (a fresh unique id) over the group's
  // devices, or across processes one communicator over every GPU of every process (collective:
  // one thread of each process calls this).
  absl::Status EnsureComms() {
    std::lock_guard lock(comms_mu_);
    if (!comms_.empty() || !comms_status_.ok()) return comms_status_;
    auto made = m_.process_group() ? JoinWorld() : cuda::NcclComm::CreateAll(m_.devices(), timeout_);
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
    ProcessGroup& world = *m_.process_group();
    // Rank 0's unique id, behind a byte that says whether rank 0 could make one (so that the
    // others fail with its reason's summary instead of waiting out NCCL's deadline).
    std::string id(1 + NCCL_UNIQUE_ID_BYTES, '\0');
    absl::Status made;
    if (world.rank() == 0) {
      absl::StatusOr<std::string> fresh = cuda::NcclComm::NewUniqueId();
      if (fresh.ok()) {
        id[0] = 1;
        id.replace(1, fresh->size(), *fresh);
      } else {
        made = fresh.status();
      }
    }
    absl::Status sent = world.Broadcast(absl::StrCat("nccl unique id for ", m_.size(), " CUDA device(s) per process"),
                                        id.data(), static_cast<int64_t>(id.size()), 0);
    if (!sent.ok()) return sent;
    if (!made.ok()) return made;
    if (id[0] != 1) return absl::UnavailableError("rank 0 could not make an NCCL unique id (see its error)");
    return cuda::NcclComm::Join(absl::string_view(id).substr(1), world.rank() * m_.size(), m_.global_size(),
                                m_.devices(), timeout_);
  }

  // Before NCCL moves data across processes: the communicators exist, every process makes this
  // very call, and the communicators are healthy.
  absl::Status Prepare(const CollectiveCall& call) {
    if (absl::Status s = EnsureComms(); !s.ok()) return s;
    if (absl::Status s = watchdog_->status(); !s.ok()) return s;  // aborted earlier
    if (!m_.process_group()) return absl::OkStatus();
    if (absl::Status s = m_.process_group()->Agree(call.AcrossProcesses(m_.size())); !s.ok()) {
      // A mismatch is the caller's error and leaves the group usable; a peer that is gone may
      // leave a previous collective waiting for it on the GPU.
      if (s.code() != absl::StatusCode::kInvalidArgument) watchdog_->Fail(s);
      return s;
    }
    return watchdog_->status();
  }

  // Returns what to report: the group's own failure, which names the cause, once there is one
  // (a member whose communicator another's failure aborted would only say "aborted"). Unless
  // the call was refused before anything was queued, the peers may wait for this rank's
  // half, so the whole group is aborted.
  absl::Status FailedRun(const absl::Status& s) {
    if (s.code() == absl::StatusCode::kInvalidArgument || watchdog_ == nullptr) return s;
    watchdog_->Fail(s);
    return watchdog_->status();
  }

  const GroupMembership<CudaDevice>& m_;
  Meeting meeting_;
  std::vector<absl::Status> refused_;  // member r's call refused before the round (its own write)
  const std::chrono::milliseconds timeout_;
  std::mutex comms_mu_;
  absl::Status comms_status_;
  std::vector<std::unique_ptr<cuda::NcclComm>> comms_;
  std::unique_ptr<cuda::NcclWatchdog> watchdog_;  // destroyed before comms_
};

// The engine of CUDA device groups.
template <>
struct EngineOf<Cuda> {
  using type = NcclEngine;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_NCCL_NCCL_ENGINE_H_
