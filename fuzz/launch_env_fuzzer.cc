// ReadLaunchEnv on any environment: a status, never a crash. The input is lines NAME=VALUE, a
// fake environment (a later line wins, as with setenv). What is accepted must be a place (and a
// run generation) a rank can take; what is refused must say so in a short message that never
// shows the token.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "distributed/process/launch_env.h"

namespace {

using kiln::distributed::CheckRendezvousAddress;
using kiln::distributed::kMaxGenerationRunIdLength;
using kiln::distributed::kMaxHostLength;
using kiln::distributed::kMaxLocalWorldSize;
using kiln::distributed::kMaxRendezvousLength;
using kiln::distributed::kMaxRestartCount;
using kiln::distributed::kMaxRunIdLength;
using kiln::distributed::kMaxRunTokenLength;
using kiln::distributed::kMaxWorldSize;
using kiln::distributed::kMinRunTokenLength;
using kiln::distributed::LaunchEnv;

void Require(bool ok) {
  if (!ok) std::abort();
}

bool Text(const std::string& s, size_t max_length) {
  if (s.size() > max_length) return false;
  for (const char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

void CheckAccepted(const LaunchEnv& e, const std::map<std::string, std::string>& vars) {
  Require(e.source == "kiln" || e.source == "openmpi" || e.source == "slurm");
  const char* rank = e.source == "kiln" ? "KILN_RANK" : e.source == "openmpi" ? "OMPI_COMM_WORLD_RANK" : "SLURM_PROCID";
  Require(vars.count(rank) == 1);
  Require(1 <= e.world_size && e.world_size <= kMaxWorldSize);
  Require(0 <= e.rank && e.rank < e.world_size);
  Require(1 <= e.local_world_size && e.local_world_size <= e.world_size && e.local_world_size <= kMaxLocalWorldSize);
  Require(0 <= e.local_rank && e.local_rank < e.local_world_size);
  Require(CheckRendezvousAddress(e.rendezvous).ok());
  Require(Text(e.rendezvous, kMaxRendezvousLength));
  Require(Text(e.host, kMaxHostLength));
  // A generation above 0 is named at the end of the run id, and only there.
  Require(0 <= e.restart_count && e.restart_count <= kMaxRestartCount);
  const std::string generation = absl::StrCat("restart-", e.restart_count);
  if (e.restart_count == 0) {
    Require(Text(e.run_id, kMaxRunIdLength));
  } else {
    Require(Text(e.run_id, kMaxGenerationRunIdLength));
    Require(e.run_id == generation || absl::EndsWith(e.run_id, "." + generation));
    Require(vars.count("KILN_RESTART_COUNT") == 1 || vars.count("SLURM_RESTART_COUNT") == 1);
  }
  if (!e.run_token.empty()) {
    Require(e.run_token.size() >= kMinRunTokenLength && e.run_token.size() <= kMaxRunTokenLength);
    for (const char c : e.run_token) Require(c > ' ' && c <= '~');
  }
}

// ReadLaunchEnv on a map of variables.
absl::StatusOr<std::optional<LaunchEnv>> Read(const std::map<std::string, std::string>& vars) {
  return kiln::distributed::ReadLaunchEnv([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

// A refusal of the token may depend on its length and where its first bad byte is, nothing
// else: the same message must come for a token of 'a's with a space at that byte.
void CheckTokenRefusal(absl::string_view message, std::map<std::string, std::string> vars) {
  const std::string token = vars["KILN_RUN_TOKEN"].c_str();  // what getenv would give
  std::string blank(token.size(), 'a');
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] <= ' ' || token[i] > '~') {
      blank[i] = ' ';
      break;
    }
  }
  vars["KILN_RUN_TOKEN"] = blank;
  const auto again = Read(vars);
  Require(!again.ok() && again.status().message() == message);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::map<std::string, std::string> vars;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    if (const size_t eq = line.find('='); eq != std::string_view::npos) {
      vars[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
    start = end + 1;
  }
  const auto env = Read(vars);
  if (env.ok()) {
    if (env->has_value()) CheckAccepted(**env, vars);
    return 0;
  }
  const absl::string_view message = env.status().message();
  Require(env.status().code() == absl::StatusCode::kInvalidArgument);
  Require(!message.empty() && message.size() <= 1024);  // values are quoted cut short
  if (absl::StartsWith(message, "KILN_RUN_TOKEN")) CheckTokenRefusal(message, vars);
  return 0;
}
