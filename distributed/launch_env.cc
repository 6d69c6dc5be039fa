#include "distributed/launch_env.h"

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace kiln::distributed {
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

// An integer variable; `fallback` when unset.
absl::StatusOr<int> Int(const GetEnv& getenv, const char* name, int fallback) {
  const char* value = getenv(name);
  if (value == nullptr) return fallback;
  int out = 0;
  if (!absl::SimpleAtoi(value, &out)) {
    return absl::InvalidArgumentError(absl::StrCat(name, "='", value, "' is not an integer"));
  }
  return out;
}

}  // namespace

absl::Status CheckRendezvousAddress(const std::string& address) {
  absl::string_view rest = address;
  if (absl::ConsumePrefix(&rest, "file://")) {
    if (absl::StartsWith(rest, "/") && rest.size() > 1) return absl::OkStatus();
  } else if (absl::ConsumePrefix(&rest, "redis://")) {
    const size_t colon = rest.rfind(':');
    int port = 0;
    if (!rest.empty() && (colon == absl::string_view::npos ||
                          (colon > 0 && absl::SimpleAtoi(rest.substr(colon + 1), &port) &&
                           port > 0 && port < 65536))) {
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "rendezvous address '", address,
      "': expected file:///absolute/shared/dir or redis://host[:port]"));
}

absl::StatusOr<std::optional<LaunchEnv>> ReadLaunchEnv(const GetEnv& getenv) {
  const Family* family = nullptr;
  for (const Family& f : kFamilies) {
    const bool rank = getenv(f.rank) != nullptr, size = getenv(f.world_size) != nullptr;
    if (rank != size) {
      return absl::InvalidArgumentError(absl::StrCat(
          rank ? f.rank : f.world_size, " is set but ", rank ? f.world_size : f.rank,
          " is not; a launcher sets both"));
    }
    if (rank) {
      family = &f;
      break;
    }
  }
  if (family == nullptr) return std::nullopt;

  LaunchEnv env;
  env.source = family->source;
  absl::StatusOr<int> size = Int(getenv, family->world_size, 1);
  if (!size.ok()) return size.status();
  if (*size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(family->world_size, "=", *size,
                                                   ": the world size must be at least 1"));
  }
  absl::StatusOr<int> rank = Int(getenv, family->rank, 0);
  if (!rank.ok()) return rank.status();
  if (*rank < 0 || *rank >= *size) {
    return absl::InvalidArgumentError(absl::StrCat(family->rank, "=", *rank, " is out of range for ",
                                                   family->world_size, "=", *size, " (ranks are 0..",
                                                   *size - 1, ")"));
  }
  absl::StatusOr<int> local_size = Int(getenv, family->local_world_size, 1);
  if (!local_size.ok()) return local_size.status();
  absl::StatusOr<int> local_rank = Int(getenv, family->local_rank, 0);
  if (!local_rank.ok()) return local_rank.status();
  if (*local_size < 1 || *local_size > *size) {
    return absl::InvalidArgumentError(absl::StrCat(family->local_world_size, "=", *local_size,
                                                   " must be in 1..", family->world_size, "=", *size));
  }
  if (*local_rank < 0 || *local_rank >= *local_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        family->local_rank, "=", *local_rank, " is out of range for ", *local_size,
        " rank(s) on this machine (", family->local_world_size, ")"));
  }
  env.world_size = *size;
  env.rank = *rank;
  env.local_world_size = *local_size;
  env.local_rank = *local_rank;

  const char* rendezvous = getenv("KILN_RENDEZVOUS");
  if (rendezvous == nullptr || *rendezvous == '\0') {
    return absl::InvalidArgumentError(absl::StrCat(
        family->rank, " and ", family->world_size, " are set but KILN_RENDEZVOUS is not; set it to "
        "file:///shared/dir or redis://host:port, the same for every rank"));
  }
  env.rendezvous = rendezvous;
  if (absl::Status s = CheckRendezvousAddress(env.rendezvous); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("KILN_RENDEZVOUS: ", s.message()));
  }
  if (const char* id = getenv("KILN_RUN_ID"); id != nullptr) {
    env.run_id = id;
  } else if (const char* job = getenv("SLURM_JOB_ID"); job != nullptr) {
    const char* step = getenv("SLURM_STEP_ID");
    env.run_id = absl::StrCat("slurm-", job, ".", step == nullptr ? "0" : step);
  }
  if (const char* host = getenv("KILN_HOST"); host != nullptr) env.host = host;
  return env;
}

absl::StatusOr<std::optional<LaunchEnv>> ReadLaunchEnv() {
  return ReadLaunchEnv([](const char* name) { return std::getenv(name); });
}

}  // namespace kiln::distributed
