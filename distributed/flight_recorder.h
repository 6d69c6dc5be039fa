// The flight recorder of a device group: every member keeps its last K collective calls in a
// ring (op, tag, dtype and shape, sequence number, enqueue, start and end times, state), written
// by the group's front end (device_group.h), which every call of every engine passes through,
// and marked started by the engine once the local members have met. Cheap enough to be on by
// default: a few clock reads and an uncontended lock per call (bench/README.md).
//
// When a call fails (a deadline, a lost peer, a mismatch), the recorder works out who is
// behind and in which call, across processes through the process group's side channel (each
// rank leaves its last calls as a note and reads the others'; a rank that leaves none within a
// short wait is named as stopped, hung or gone), appends that to the error, prints a few lines
// on stderr and writes every member's ring to <dir>/rank<R>.json (flight_dump.h), where dir is
// GroupOptions::flight_recorder_dir or $KILN_FLIGHT_RECORDER_DIR. tools/flight_recorder merges
// the ranks' dumps. A failure is reported once: the same status again (a broken group's later
// calls) gets the same message and writes nothing.
#ifndef KILN_DISTRIBUTED_FLIGHT_RECORDER_H_
#define KILN_DISTRIBUTED_FLIGHT_RECORDER_H_

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "distributed/collective_call.h"
#include "distributed/flight_dump.h"
#include "distributed/group_options.h"
#include "tensor/shape.h"

namespace kiln::distributed {

inline constexpr char kFlightRecorderDirEnv[] = "KILN_FLIGHT_RECORDER_DIR";

class FlightRecorder {
 public:
  // Throws kiln::Error (InvalidArgument) for a capacity CheckFlightRecorder refuses.
  FlightRecorder(int members, const GroupOptions& options);
  FlightRecorder(const FlightRecorder&) = delete;
  FlightRecorder& operator=(const FlightRecorder&) = delete;

  bool enabled() const { return capacity_ > 0; }
  int capacity() const { return capacity_; }
  // This group's number among the groups of its process, in order of creation (its dump is
  // rank<R>.json for group 0, rank<R>.group<N>.json for the others).
  int group() const { return group_; }
  // Where a failure writes this process's dump; empty when no folder is set.
  std::string dump_path() const;

  // A member's call begins: gives `call` its sequence number (the member's count of calls).
  void Enter(int member, CollectiveCall& call, absl::string_view tag, DType dtype, const Shape& shape);
  // The engine has met the other local members and starts moving data.
  void Start(int member, uint64_t seq);
  // The call ended with `s`: OK as it is; a failure with the diagnosis appended (and reported).
  absl::Status End(int member, uint64_t seq, const absl::Status& s);

  // Every member's kept calls, oldest first (last_only: each member's last call).
  FlightDump Snapshot(bool last_only) const;

 private:
  struct Entry {
    uint64_t seq = 0;
    Collective collective = Collective::kAllReduce;
    ReduceOp op = ReduceOp::kSum;
    int root = 0;
    std::string tag;
    DType dtype = DType::kF32;
    Dims dims;
    int64_t enqueued_us = 0, started_us = 0, ended_us = 0;
    uint8_t state = 0;  // index into kStates of flight_recorder.cc
    std::string error;
  };
  // One member's ring, written by that member's thread; read by whoever reports a failure.
  struct alignas(64) Ring {
    mutable std::mutex mu;
    std::vector<Entry> slots;
    uint64_t next = 0;  // the next call's sequence number
  };

  absl::Status Report(const absl::Status& s);
  FlightDumpEntry Export(int member, const Entry& e) const;
  std::string WriteDump(const FlightDump& dump) const;
  // The report's lines for stderr: the failure, the diagnosis, each member's last calls (eight
  // members at most), where the dump went.
  std::string ReportLines(const absl::Status& s, const FlightDump& dump, const std::string& where) const;

  const int members_;
  const int capacity_;
  const int group_;
  const std::string dir_;
  const std::shared_ptr<ProcessGroup> world_;
  const std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<Ring>> rings_;

  std::mutex report_mu_;  // one report at a time; the others wait for it
  absl::Status reported_;
  absl::Status report_;
  int incidents_ = 0;
};

// OK for a capacity in [0, kMaxFlightCapacity] (0: off); InvalidArgument naming `what`.
absl::Status CheckFlightRecorder(const GroupOptions& options, const char* what);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_FLIGHT_RECORDER_H_
