// Which member or rank of a failed group is behind, and in which call: the sentence the flight
// recorder adds to a failed collective's error, e.g.
//   rank 1 last entered 'step 187 bucket 0' (seq 1403, completed); rank 0 is waiting in
//   'step 188 bucket 2' (seq 1411)
// A party is a member (a group in one process) or a rank (across processes).
#ifndef KILN_DISTRIBUTED_FLIGHT_DIAGNOSIS_H_
#define KILN_DISTRIBUTED_FLIGHT_DIAGNOSIS_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::distributed {

// Where one party stands: its last call, as far as anyone knows.
struct FlightPosition {
  enum Kind { kCalled, kNoCall, kSilent };
  Kind kind = kCalled;    // kSilent: a rank that did not report (stopped, hung or gone)
  int index = 0;          // the member or rank
  uint64_t seq = 0;       // kCalled: its last call
  std::string call;       // FlightCallName: its tag, if it has one
  std::string signature;  // op, tag, dtype and shape: what tells apart calls of one tag
  std::string state;      // "entered", "started", "completed", "failed"
};

// `noun`: "member" or "rank". `silent_wait`: how long the silent were waited for. The parties
// with the lowest last call (or none, or silent) are behind; the others are waiting. Those at
// the lead in different calls (a mismatch) are named with their calls' full signatures.
std::string DiagnoseFlight(const std::vector<FlightPosition>& parties, const char* noun,
                           std::chrono::milliseconds silent_wait);

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_FLIGHT_DIAGNOSIS_H_
