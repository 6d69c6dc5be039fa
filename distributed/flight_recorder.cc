#include "distributed/flight_recorder.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "distributed/flight_diagnosis.h"
#include "nn/file_io.h"
#include "tensor/error.h"

namespace kiln::distributed {
namespace {

constexpr const char* kStates[] = {"entered", "started", "completed", "failed"};
enum : uint8_t { kEntered, kStarted, kCompleted, kFailed };

int64_t NowUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::atomic<int> groups_made{0};

std::string DirFrom(const GroupOptions& options) {
  if (!options.flight_recorder_dir.empty()) return options.flight_recorder_dir;
  const char* env = std::getenv(kFlightRecorderDirEnv);
  return env == nullptr ? "" : env;
}

// mkdir -p.
absl::Status MakeDirectories(const std::string& dir) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at == dir.size() || dir[at] == '/') {
      const std::string prefix = dir.substr(0, at);
      if (mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::FailedPreconditionError(absl::StrCat("cannot create ", prefix, ": ", std::strerror(errno)));
      }
    }
  }
  return absl::OkStatus();
}

// How far a state has come, to rank two members at one sequence number.
int Progress(const std::string& state) {
  return state == "completed" ? 3 : state == "failed" ? 2 : state == "started" ? 1 : 0;
}

// Where a party whose calls are `entries` (any members of one process) stands: at its most
// behind member (one with no call at all is the furthest behind).
FlightPosition PositionOf(int index, int members, const std::vector<FlightDumpEntry>& entries) {
  std::vector<const FlightDumpEntry*> last(members, nullptr);
  for (const FlightDumpEntry& e : entries) {
    if (last[e.member] == nullptr || e.seq >= last[e.member]->seq) last[e.member] = &e;
  }
  const FlightDumpEntry* worst = nullptr;
  for (const FlightDumpEntry* e : last) {
    if (e == nullptr) return {.kind = FlightPosition::kNoCall, .index = index};
    if (worst == nullptr || e->seq < worst->seq ||
        (e->seq == worst->seq && Progress(e->state) < Progress(worst->state)))
      worst = e;
  }
  if (worst == nullptr) return {.kind = FlightPosition::kNoCall, .index = index};
  return {.kind = FlightPosition::kCalled,
          .index = index,
          .seq = worst->seq,
          .call = FlightCallName(*worst),
          .signature = FlightSignature(*worst),
          .state = worst->state};
}

std::vector<FlightDumpEntry> OfMember(const std::vector<FlightDumpEntry>& entries, int member) {
  std::vector<FlightDumpEntry> out;
  for (const FlightDumpEntry& e : entries) {
    if (e.member == member) out.push_back(e);
  }
  return out;
}

// "seq 3 'call 3' completed in 0.1 ms": a call as a line on stderr shows it.
std::string Line(const FlightDumpEntry& e) {
  const int64_t end = e.ended_us > 0 ? e.ended_us : NowUs();
  return absl::StrCat("seq ", e.seq, " ", FlightCallName(e), " ", e.state, e.ended_us > 0 ? " in " : " for ",
                      absl::StrFormat("%.1f", (end - e.enqueued_us) / 1000.0), " ms");
}

// Each rank's position at the incident, from the note it left under `key` (its last call)
// within `wait`; silent for a rank that left none. `mine`: this rank's own last calls.
std::vector<FlightPosition> RankPositions(ProcessGroup& world, const std::string& key, const FlightDump& mine,
                                          int members, std::chrono::milliseconds wait) {
  std::vector<FlightPosition> parties;
  const std::vector<std::optional<std::string>> notes = world.ExchangeNotes(key, FlightDumpToJson(mine), wait);
  for (int rank = 0; rank < world.world_size(); ++rank) {
    if (rank == world.rank()) {
      parties.push_back(PositionOf(rank, members, mine.entries));
      continue;
    }
    absl::StatusOr<FlightDump> note = absl::NotFoundError("no note");
    if (rank < static_cast<int>(notes.size()) && notes[rank].has_value()) note = ParseFlightDump(*notes[rank]);
    if (note.ok() && note->rank == rank) {
      parties.push_back(PositionOf(rank, note->members, note->entries));
    } else {
      parties.push_back({.kind = FlightPosition::kSilent, .index = rank});
    }
  }
  return parties;
}

// Each member's position in `dump`, each a party of one member.
std::vector<FlightPosition> MemberPositions(const FlightDump& dump, int members) {
  std::vector<FlightPosition> parties;
  for (int r = 0; r < members; ++r) {
    std::vector<FlightDumpEntry> calls = OfMember(dump.entries, r);
    for (FlightDumpEntry& e : calls) e.member = 0;  // a party of one member
    parties.push_back(PositionOf(r, 1, calls));
  }
  return parties;
}

}  // namespace

absl::Status CheckFlightRecorder(const GroupOptions& options, const char* what) {
  if (options.flight_recorder_entries >= 0 && options.flight_recorder_entries <= kMaxFlightCapacity) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(what, ": flight_recorder_entries ", options.flight_recorder_entries,
                                                 " must be in [0, ", kMaxFlightCapacity, "] (0 turns it off)"));
}

FlightRecorder::FlightRecorder(int members, const GroupOptions& options)
    : members_(members),
      capacity_(options.flight_recorder_entries),
      group_(groups_made.fetch_add(1)),
      dir_(DirFrom(options)),
      world_(options.process_group),
      timeout_(options.timeout) {
  if (absl::Status s = CheckFlightRecorder(options, "device group"); !s.ok()) throw Error(s);
  if (capacity_ == 0) return;
  for (int r = 0; r < members; ++r) {
    rings_.push_back(std::make_unique<Ring>());
    rings_.back()->slots.resize(capacity_);
  }
}

std::string FlightRecorder::dump_path() const {
  if (dir_.empty()) return "";
  return absl::StrCat(dir_, "/rank", world_ ? world_->rank() : 0, group_ == 0 ? "" : absl::StrCat(".group", group_),
                      ".json");
}

void FlightRecorder::Enter(int member, CollectiveCall& call, absl::string_view tag, DType dtype, const Shape& shape) {
  if (capacity_ == 0) return;
  const int64_t now = NowUs();
  Ring& ring = *rings_[member];
  std::lock_guard lock(ring.mu);
  Entry& e = ring.slots[ring.next % capacity_];
  e.seq = ring.next++;
  e.collective = call.collective;
  e.op = call.op;
  e.root = call.root;
  e.tag.assign(tag.data(), tag.size());  // the slot's own buffer, reused lap after lap
  e.dtype = dtype;
  e.dims.assign(shape.dims().begin(), shape.dims().end());
  e.enqueued_us = now;
  e.started_us = e.ended_us = 0;
  e.state = kEntered;
  e.error.clear();
  call.recorder = this;
  call.member = member;
  call.seq = e.seq;
}

void FlightRecorder::Start(int member, uint64_t seq) {
  const int64_t now = NowUs();
  Ring& ring = *rings_[member];
  std::lock_guard lock(ring.mu);
  Entry& e = ring.slots[seq % capacity_];
  if (e.seq != seq) return;
  e.started_us = now;
  e.state = kStarted;
}

absl::Status FlightRecorder::End(int member, uint64_t seq, const absl::Status& s) {
  if (capacity_ == 0) return s;
  const int64_t now = NowUs();
  {
    Ring& ring = *rings_[member];
    std::lock_guard lock(ring.mu);
    Entry& e = ring.slots[seq % capacity_];
    if (e.seq == seq) {
      e.ended_us = now;
      e.state = s.ok() ? kCompleted : kFailed;
      if (!s.ok()) e.error = s.ToString();
    }
  }
  return s.ok() ? s : Report(s);
}

FlightDumpEntry FlightRecorder::Export(int member, const Entry& e) const {
  return {.member = member,
          .seq = e.seq,
          .op = CollectiveCall::Name(e.collective, e.op, e.root),
          .tag = e.tag,
          .dtype = DTypeName(e.dtype),
          .shape = std::vector<int64_t>(e.dims.begin(), e.dims.end()),
          .enqueued_us = e.enqueued_us,
          .started_us = e.started_us,
          .ended_us = e.ended_us,
          .state = kStates[e.state],
          .error = e.error};
}

FlightDump FlightRecorder::Snapshot(bool last_only) const {
  FlightDump d{.group = group_,
               .rank = world_ ? world_->rank() : 0,
               .world_size = world_ ? world_->world_size() : 1,
               .members = members_,
               .capacity = capacity_,
               .dumped_us = NowUs()};
  for (int r = 0; r < static_cast<int>(rings_.size()); ++r) {
    const Ring& ring = *rings_[r];
    std::lock_guard lock(ring.mu);
    const uint64_t kept = std::min<uint64_t>(ring.next, last_only ? 1 : capacity_);
    for (uint64_t seq = ring.next - kept; seq < ring.next; ++seq)
      d.entries.push_back(Export(r, ring.slots[seq % capacity_]));
  }
  return d;
}

std::string FlightRecorder::WriteDump(const FlightDump& dump) const {
  const std::string path = dump_path();
  if (path.empty()) return absl::StrCat(" (set ", kFlightRecorderDirEnv, " to dump every member's last calls)");
  absl::Status s = MakeDirectories(dir_);
  if (s.ok()) {
    const std::string json = FlightDumpToJson(dump);
    s = nn::WriteFileAtomically(path, {json});
  }
  if (!s.ok()) return absl::StrCat("; could not write ", path, ": ", s.message());
  return absl::StrCat("; calls dumped to ", path);
}

absl::Status FlightRecorder::Report(const absl::Status& s) {
  std::lock_guard lock(report_mu_);
  if (s == reported_) return report_;  // the same failure, met by another member or call
  reported_ = s;
  const int incident = incidents_++;
  FlightDump dump = Snapshot(/*last_only=*/false);
  dump.reason = s.ToString();
  const bool across = world_ != nullptr && world_->world_size() > 1;
  // Silent peers are waited for only this long: long enough for peers failing the same call at
  // their own deadlines, short against the timeout.
  const auto wait = across ? std::clamp(std::min(timeout_, world_->timeout()) / 2, std::chrono::milliseconds(100),
                                        std::chrono::milliseconds(5000))
                           : std::chrono::milliseconds(0);
  const std::vector<FlightPosition> parties =
      across ? RankPositions(*world_, absl::StrCat("flight_recorder/group", group_, "/incident", incident),
                             Snapshot(/*last_only=*/true), members_, wait)
             : MemberPositions(dump, members_);
  dump.diagnosis = DiagnoseFlight(parties, across ? "rank" : "member", wait);
  const std::string where = WriteDump(dump);
  std::fputs(ReportLines(s, dump, where).c_str(), stderr);
  report_ = absl::Status(s.code(), absl::StrCat(s.message(), "; flight recorder: ", dump.diagnosis, where));
  return report_;
}

std::string FlightRecorder::ReportLines(const absl::Status& s, const FlightDump& dump, const std::string& where) const {
  const std::string head =
      absl::StrCat("kiln flight recorder (rank ", dump.rank, " of ", dump.world_size, ", group ", group_, "): ");
  std::string lines = absl::StrCat(head, s.ToString().substr(0, 600), "\n", head, dump.diagnosis, "\n");
  for (int r = 0; r < std::min(members_, 8); ++r) {
    std::vector<FlightDumpEntry> calls = OfMember(dump.entries, r);
    if (calls.size() > 3) calls.erase(calls.begin(), calls.end() - 3);
    std::vector<std::string> shown;
    for (const FlightDumpEntry& e : calls) shown.push_back(Line(e));
    lines += absl::StrCat(head, "member ", r, ": ", shown.empty() ? "no call" : absl::StrJoin(shown, "; "), "\n");
  }
  lines += absl::StrCat(head,
                        dump_path().empty() ? absl::StrCat("no dump: ", kFlightRecorderDirEnv, " is not set")
                                            : absl::StrCat(where.substr(2),
                                                           "; merge the ranks' dumps with "
                                                           "tools/flight_recorder ",
                                                           dir_),
                        "\n");
  return lines;
}

void CollectiveCall::Started() const {
  if (recorder != nullptr) recorder->Start(member, seq);
}

}  // namespace kiln::distributed
