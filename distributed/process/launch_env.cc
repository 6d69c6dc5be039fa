#include "distributed/process/launch_env.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace kiln::distributed {

// Why these limits: every rank of a Gloo process group holds a TCP connection to every other,
// so a world of 65536 already means 65535 connections (and file descriptors) per rank, far past
// any run kiln is meant for; a larger value is a typo such as 2147483647, and accepting it would
// leave rank 0 waiting for ranks that never come. On one machine, more than one rank per CPU does not help, and Linux
// runs at most 8192 CPUs on x86-64 (MAXSMP).
static_assert(kMaxLocalWorldSize <= kMaxWorldSize);
// A restart starts every rank again, which takes seconds at the least: a million restarts is
// past any job's life, so a larger generation is a corrupt variable. The bound also keeps the
// ".restart-G" suffix within kMaxGenerationRunIdLength.
static_assert(kMaxGenerationRunIdLength - kMaxRunIdLength == sizeof(".restart-1000000") - 1);

namespace {

// One launcher's names for the same four facts.
struct Family {
  const char* source;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* local_world_size;
};

constexpr Family kFamilies[] = {
    {"kiln", "KILN_RANK", "KILN_WORLD_SIZE", "KILN_LOCAL_RANK", "KILN_LOCAL_WORLD_SIZE"},
    {"openmpi", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"},
    {"slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"},
};

// Slurm's ids are numbers (an array job adds _N, a step may be "batch"); this keeps
// slurm-JOB.STEP within kMaxRunIdLength.
constexpr size_t kMaxSlurmIdLength = 64;

// A value as a message shows it: escaped, so that control bytes and quotes cannot forge lines,
// and cut, so that a 1 MB variable still gives a readable message.
std::string Quote(absl::string_view value) {
  constexpr size_t kShown = 64;
  if (value.size() <= kShown) return absl::StrCat("'", absl::CHexEscape(value), "'");
  return absl::StrCat("'", absl::CHexEscape(value.substr(0, kShown)), "'... (", value.size(), " bytes)");
}

bool AllDigits(absl::string_view s) {
  for (const char c : s) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  return !s.empty();
}

// An exact decimal integer: an optional '-' and digits, nothing else (absl::SimpleAtoi would
// also take white space and a '+', so "KILN_RANK= 1" would pass for 1).
absl::StatusOr<int64_t> ParseInt(const char* name, absl::string_view text) {
  absl::string_view digits = text;
  absl::ConsumePrefix(&digits, "-");
  if (!AllDigits(digits)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", Quote(text), " is not an integer"));
  }
  int64_t out = 0;
  if (!absl::SimpleAtoi(text, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "=", Quote(text), " is out of range"));
  }
  return out;
}

// An integer variable; `fallback` when unset.
absl::StatusOr<int64_t> Int(const GetEnv& getenv, const char* name, int64_t fallback) {
  const char* value = getenv(name);
  if (value == nullptr) return fallback;
  return ParseInt(name, value);
}

// Text that ends up in addresses, store keys and messages: bounded, and without control
// characters (which would forge log lines and make keys no one can type).
absl::Status CheckText(absl::string_view label, absl::string_view separator, absl::string_view value,
                       size_t max_length) {
  if (value.size() > max_length) {
    return absl::InvalidArgumentError(
        absl::StrCat(label, " is ", value.size(), " bytes long; at most ", max_length, " are accepted"));
  }
  for (size_t i = 0; i < value.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(value[i]);
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError(
          absl::StrCat(label, separator, Quote(value), " has a control character at byte ", i));
    }
  }
  return absl::OkStatus();
}

// The run token is a secret: its errors say what is wrong with it, never what it is.
absl::Status CheckRunToken(absl::string_view token) {
  if (token.size() < kMinRunTokenLength || token.size() > kMaxRunTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat("KILN_RUN_TOKEN is ", token.size(), " bytes long; it must be ",
                                                   kMinRunTokenLength, "..", kMaxRunTokenLength,
                                                   " bytes (tools/launch makes 64 hex digits)"));
  }
  for (size_t i = 0; i < token.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(token[i]);
    if (c <= ' ' || c > '~') {
      return absl::InvalidArgumentError(
          absl::StrCat("KILN_RUN_TOKEN has a space, control character or non-ASCII byte at byte ", i,
                       "; it must be printable ASCII without spaces"));
    }
  }
  return absl::OkStatus();
}

// Tasks per node as Slurm writes them ("4", "4(x2)", "2(x3),1"): the count on this node, which
// is SLURM_NODEID's entry when the counts differ.
absl::StatusOr<int64_t> SlurmTasksOnThisNode(const GetEnv& getenv, const char* name, absl::string_view value) {
  const auto malformed = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "=", Quote(value), " is not a count of tasks per node (expected e.g. 4, 4(x2) or 2(x3),1)"));
  };
  struct Run {
    int64_t count, nodes;
  };
  std::vector<Run> runs;
  int64_t nodes = 0;
  for (absl::string_view entry : absl::StrSplit(value, ',')) {
    Run run{0, 1};
    absl::string_view count = entry;
    if (const size_t open = entry.find("(x"); open != absl::string_view::npos) {
      count = entry.substr(0, open);
      absl::string_view repeat = entry.substr(open + 2);
      if (!absl::ConsumeSuffix(&repeat, ")") || !AllDigits(repeat) || !absl::SimpleAtoi(repeat, &run.nodes) ||
          run.nodes < 1) {
        return malformed();
      }
    }
    if (!AllDigits(count) || !absl::SimpleAtoi(count, &run.count)) return malformed();
    // Each node runs a task at least, so more nodes than ranks is no real allocation (and the
    // bound keeps the sum from overflowing).
    if (run.nodes > kMaxWorldSize || (nodes += run.nodes) > kMaxWorldSize) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "=", Quote(value), " describes more than ", kMaxWorldSize, " nodes"));
    }
    runs.push_back(run);
  }
  bool uniform = true;
  for (const Run& run : runs) uniform = uniform && run.count == runs.front().count;
  if (uniform) return runs.front().count;

  const char* node_id = getenv("SLURM_NODEID");
  if (node_id == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "=", Quote(value), " differs between nodes, and SLURM_NODEID (which node this is) is not set"));
  }
  absl::StatusOr<int64_t> node = ParseInt("SLURM_NODEID", node_id);
  if (!node.ok()) return node.status();
  if (*node < 0 || *node >= nodes) {
    return absl::InvalidArgumentError(absl::StrCat("SLURM_NODEID=", *node, " is out of range for the ", nodes,
                                                   " node(s) of ", name, "=", Quote(value)));
  }
  int64_t first = 0;
  for (const Run& run : runs) {
    if (*node < first + run.nodes) return run.count;
    first += run.nodes;
  }
  return malformed();  // not reached: *node < nodes
}

// The local world size and the variable it came from.
absl::StatusOr<int64_t> LocalWorldSize(const GetEnv& getenv, const Family& family, const char** name) {
  *name = family.local_world_size;
  if (std::string_view(family.source) != "slurm") return Int(getenv, family.local_world_size, 1);
  // --ntasks-per-node is what the user asked for; srun always says what this step runs.
  for (const char* slurm : {"SLURM_NTASKS_PER_NODE", "SLURM_STEP_TASKS_PER_NODE"}) {
    if (const char* value = getenv(slurm); value != nullptr) {
      *name = slurm;
      return SlurmTasksOnThisNode(getenv, slurm, value);
    }
  }
  return 1;
}

}  // namespace

absl::Status CheckRendezvousAddress(const std::string& address) {
  if (absl::Status s = CheckText("rendezvous address", " ", address, kMaxRendezvousLength); !s.ok()) {
    return s;
  }
  absl::string_view rest = address;
  if (absl::ConsumePrefix(&rest, "file://")) {
    if (absl::StartsWith(rest, "/") && rest.size() > 1) return absl::OkStatus();
  } else if (absl::ConsumePrefix(&rest, "redis://")) {
    const size_t colon = rest.rfind(':');
    int port = 0;
    if (!rest.empty() && (colon == absl::string_view::npos ||
                          (colon > 0 && AllDigits(rest.substr(colon + 1)) &&
                           absl::SimpleAtoi(rest.substr(colon + 1), &port) && port > 0 && port < 65536))) {
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat("rendezvous address ", Quote(address),
                                                 ": expected file:///absolute/shared/dir or redis://host[:port]"));
}

namespace {

// The launcher that set a rank and a world size; nullptr when none did.
absl::StatusOr<const Family*> FindFamily(const GetEnv& getenv) {
  for (const Family& f : kFamilies) {
    const bool rank = getenv(f.rank) != nullptr, size = getenv(f.world_size) != nullptr;
    if (rank != size) {
      return absl::InvalidArgumentError(absl::StrCat(rank ? f.rank : f.world_size, " is set but ",
                                                     rank ? f.world_size : f.rank, " is not; a launcher sets both"));
    }
    if (rank) return &f;
  }
  return nullptr;
}

// The world size, rank, local world size and local rank, each checked against the others.
absl::Status ReadRanks(const GetEnv& getenv, const Family& family, LaunchEnv& env) {
  absl::StatusOr<int64_t> size = Int(getenv, family.world_size, 1);
  if (!size.ok()) return size.status();
  if (*size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(family.world_size, "=", *size, ": the world size must be at least 1"));
  }
  if (*size > kMaxWorldSize) {
    return absl::InvalidArgumentError(
        absl::StrCat(family.world_size, "=", *size, ": the world size must be at most ", kMaxWorldSize));
  }
  absl::StatusOr<int64_t> rank = Int(getenv, family.rank, 0);
  if (!rank.ok()) return rank.status();
  if (*rank < 0 || *rank >= *size) {
    return absl::InvalidArgumentError(absl::StrCat(family.rank, "=", *rank, " is out of range for ", family.world_size,
                                                   "=", *size, " (ranks are 0..", *size - 1, ")"));
  }
  const char* local_size_name = nullptr;
  absl::StatusOr<int64_t> local_size = LocalWorldSize(getenv, family, &local_size_name);
  if (!local_size.ok()) return local_size.status();
  if (*local_size < 1 || *local_size > *size) {
    return absl::InvalidArgumentError(
        absl::StrCat(local_size_name, "=", *local_size, " must be in 1..", family.world_size, "=", *size));
  }
  if (*local_size > kMaxLocalWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat(local_size_name, "=", *local_size, " must be at most ",
                                                   kMaxLocalWorldSize, " (ranks on one machine)"));
  }
  absl::StatusOr<int64_t> local_rank = Int(getenv, family.local_rank, 0);
  if (!local_rank.ok()) return local_rank.status();
  if (*local_rank < 0 || *local_rank >= *local_size) {
    return absl::InvalidArgumentError(absl::StrCat(family.local_rank, "=", *local_rank, " is out of range for ",
                                                   *local_size, " rank(s) on this machine (", local_size_name, ")"));
  }
  env.world_size = static_cast<int>(*size);
  env.rank = static_cast<int>(*rank);
  env.local_world_size = static_cast<int>(*local_size);
  env.local_rank = static_cast<int>(*local_rank);
  return absl::OkStatus();
}

// KILN_RENDEZVOUS, which a launched process must have.
absl::Status ReadRendezvous(const GetEnv& getenv, const Family& family, LaunchEnv& env) {
  const char* rendezvous = getenv("KILN_RENDEZVOUS");
  if (rendezvous == nullptr || *rendezvous == '\0') {
    return absl::InvalidArgumentError(absl::StrCat(family.rank, " and ", family.world_size,
                                                   " are set but KILN_RENDEZVOUS is not; set it to "
                                                   "file:///shared/dir or redis://host:port, the same for every rank"));
  }
  env.rendezvous = rendezvous;
  if (absl::Status s = CheckRendezvousAddress(env.rendezvous); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("KILN_RENDEZVOUS: ", s.message()));
  }
  return absl::OkStatus();
}

// The run id: KILN_RUN_ID, else Slurm's job and step; none when neither is set.
absl::Status ReadRunId(const GetEnv& getenv, LaunchEnv& env) {
  if (const char* id = getenv("KILN_RUN_ID"); id != nullptr) {
    if (absl::Status s = CheckText("KILN_RUN_ID", "=", id, kMaxRunIdLength); !s.ok()) return s;
    env.run_id = id;
  } else if (const char* job = getenv("SLURM_JOB_ID"); job != nullptr) {
    const char* step = getenv("SLURM_STEP_ID");
    if (step == nullptr) step = "0";
    if (absl::Status s = CheckText("SLURM_JOB_ID", "=", job, kMaxSlurmIdLength); !s.ok()) return s;
    if (absl::Status s = CheckText("SLURM_STEP_ID", "=", step, kMaxSlurmIdLength); !s.ok()) return s;
    env.run_id = absl::StrCat("slurm-", job, ".", step);
  }
  return absl::OkStatus();
}

// The generation: tools/launch's count wins over Slurm's (launch may run inside a requeued
// job, whose count then says nothing about launch's own restarts).
absl::Status ReadGeneration(const GetEnv& getenv, LaunchEnv& env) {
  for (const char* name : {"KILN_RESTART_COUNT", "SLURM_RESTART_COUNT"}) {
    const char* value = getenv(name);
    if (value == nullptr) continue;
    absl::StatusOr<int64_t> count = ParseInt(name, value);
    if (!count.ok()) return count.status();
    if (*count < 0 || *count > kMaxRestartCount) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, "=", *count, " is out of range (a run generation is 0..", kMaxRestartCount, ")"));
    }
    env.restart_count = static_cast<int>(*count);
    break;
  }
  // Each generation meets under its own keys (launch_env.h says why).
  if (env.restart_count > 0) {
    env.run_id = absl::StrCat(env.run_id, env.run_id.empty() ? "" : ".", "restart-", env.restart_count);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::optional<LaunchEnv>> ReadLaunchEnv(const GetEnv& getenv) {
  const absl::StatusOr<const Family*> family = FindFamily(getenv);
  if (!family.ok()) return family.status();
  if (*family == nullptr) return std::nullopt;

  LaunchEnv env;
  env.source = (*family)->source;
  if (absl::Status s = ReadRanks(getenv, **family, env); !s.ok()) return s;
  if (absl::Status s = ReadRendezvous(getenv, **family, env); !s.ok()) return s;
  if (absl::Status s = ReadRunId(getenv, env); !s.ok()) return s;
  if (absl::Status s = ReadGeneration(getenv, env); !s.ok()) return s;
  if (const char* host = getenv("KILN_HOST"); host != nullptr) {
    if (absl::Status s = CheckText("KILN_HOST", "=", host, kMaxHostLength); !s.ok()) return s;
    env.host = host;
  }
  if (const char* token = getenv("KILN_RUN_TOKEN"); token != nullptr) {
    if (absl::Status s = CheckRunToken(token); !s.ok()) return s;
    env.run_token = token;
  }
  return env;
}

absl::StatusOr<std::optional<LaunchEnv>> ReadLaunchEnv() {
  return ReadLaunchEnv([](const char* name) { return std::getenv(name); });
}

}  // namespace kiln::distributed
