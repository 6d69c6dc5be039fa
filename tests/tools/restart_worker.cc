// A checkpointing rank for launch_restart_test: under tools/launch it joins the Gloo process
// group, resumes from the checkpoint in DIR (written by rank 0 after each step), runs the
// remaining steps (each an all-reduce folded into a running state) and fails on purpose where
// a --fail says. The state after the last step is the same however often the run was cut.
//
//   restart_worker --checkpoint=DIR --steps=N [--timeout_ms=T] [--fail=GEN,RANK,AFTER,HOW ...]
//
// --fail: in generation GEN (a number, or * for every one), rank RANK fails after AFTER steps
// of that generation, by raise(SIGKILL) (HOW=kill) or exit(1) (HOW=exit). Prints
// "rank R generation G resumed at step S" when the group is up and, on rank 0,
// "final state X after N steps". Exits 2 on bad usage or environment, 3 when the rendezvous or
// the checkpoint fails, and 3 after 30 s when a collective fails (unless stopped before).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/process/launch_env.h"

namespace {

using kiln::distributed::GlooProcessGroup;

struct Fail {
  std::optional<int> generation;  // unset: every generation
  int rank = 0;
  int after = 0;
  bool kill = false;
};

struct Checkpoint {
  int64_t step = 0;
  int64_t state = 1;
};

[[noreturn]] void Die(const std::string& why, int code) {
  std::fprintf(stderr, "restart_worker: %s\n", why.c_str());
  std::exit(code);
}

std::optional<Fail> ParseFail(absl::string_view spec) {
  const std::vector<std::string> parts = absl::StrSplit(spec, ',');
  Fail f;
  int generation = 0;
  if (parts.size() != 4 || !absl::SimpleAtoi(parts[1], &f.rank) || !absl::SimpleAtoi(parts[2], &f.after)) {
    return std::nullopt;
  }
  if (parts[0] != "*") {
    if (!absl::SimpleAtoi(parts[0], &generation)) return std::nullopt;
    f.generation = generation;
  }
  if (parts[3] != "kill" && parts[3] != "exit") return std::nullopt;
  f.kill = parts[3] == "kill";
  return f;
}

// The checkpoint: "STEP STATE"; none yet is step 0.
Checkpoint Load(const std::string& path) {
  Checkpoint c;
  std::ifstream in(path);
  if (in && !(in >> c.step >> c.state)) Die(absl::StrCat("unreadable checkpoint ", path), 3);
  return c;
}

// Written whole or not at all (a rank stopped mid-write leaves the previous one): a temporary
// file renamed over the checkpoint.
void Save(const std::string& path, const Checkpoint& c) {
  const std::string tmp = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << c.step << " " << c.state << "\n";
    if (!out.flush()) Die(absl::StrCat("cannot write ", tmp), 3);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) Die(absl::StrCat("cannot rename ", tmp), 3);
}

// A collective fails when a peer is gone. Ending this rank is then the launcher's job: it waits
// to be stopped, so that the rank that failed on purpose is the first to exit, and the one
// the launcher names.
void Check(const absl::Status& s) {
  if (s.ok()) return;
  std::fprintf(stderr, "restart_worker: %s\n", s.ToString().c_str());
  sleep(30);
  std::exit(3);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int64_t steps = -1;
  int timeout_ms = 20000;  // of the rendezvous and every collective
  std::vector<Fail> fails;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--checkpoint=")) {
      dir = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--steps=")) {
      if (!absl::SimpleAtoi(arg, &steps)) Die("bad --steps", 2);
    } else if (absl::ConsumePrefix(&arg, "--timeout_ms=")) {
      if (!absl::SimpleAtoi(arg, &timeout_ms)) Die("bad --timeout_ms", 2);
    } else if (absl::ConsumePrefix(&arg, "--fail=")) {
      std::optional<Fail> f = ParseFail(arg);
      if (!f) Die(absl::StrCat("bad --fail=", arg), 2);
      fails.push_back(*f);
    } else {
      Die(absl::StrCat("unknown argument ", argv[i]), 2);
    }
  }
  if (dir.empty() || steps < 0) Die("usage: restart_worker --checkpoint=DIR --steps=N [--fail=GEN,RANK,AFTER,HOW]", 2);
  auto env = kiln::distributed::ReadLaunchEnv();
  if (!env.ok()) Die(env.status().ToString(), 2);
  if (!env->has_value()) Die("not started by a launcher", 2);
  const int rank = (*env)->rank, generation = (*env)->restart_count;

  // Read before joining: rank 0 writes the next checkpoint only after a step, which needs
  // every rank in the group, so all ranks of a generation resume from the same one.
  const std::string path = absl::StrCat(dir, "/checkpoint");
  Checkpoint c = Load(path);
  auto group = GlooProcessGroup::Connect(
      kiln::distributed::ProcessGroupOptions::From(**env, std::chrono::milliseconds(timeout_ms)));
  if (!group.ok()) Die(group.status().ToString(), 3);
  // Every peer must be of this generation and resume at the same step.
  Check((*group)->Agree(absl::StrCat("generation ", generation, " resuming at step ", c.step)));
  std::printf("rank %d generation %d resumed at step %ld\n", rank, generation, static_cast<long>(c.step));
  std::fflush(stdout);

  for (int64_t done = 0; c.step < steps; ++done) {
    for (const Fail& f : fails) {
      if (f.rank != rank || f.after != done || (f.generation && *f.generation != generation)) continue;
      if (f.kill) raise(SIGKILL);
      std::exit(1);
    }
    int64_t part = (rank + 1) * (c.step + 1), sum = 0;
    Check((*group)->AllReduce("step", &part, &sum, 1, kiln::DType::kI64, kiln::ReduceOp::kSum));
    c.state = (c.state * 31 + sum) % 1000000007;
    ++c.step;
    if (rank == 0) Save(path, c);
    // The step is done once its checkpoint is: no rank fails between the two.
    Check((*group)->Agree(absl::StrCat("saved step ", c.step)));
  }
  if (rank == 0) std::printf("final state %ld after %ld steps\n", static_cast<long>(c.state), static_cast<long>(steps));
  return 0;
}
