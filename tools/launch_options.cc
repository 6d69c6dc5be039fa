#include "tools/launch_options.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "distributed/process/launch_env.h"
#include "tools/launch_backoff.h"

namespace kiln::launch {
namespace {

// More ranks than any machine has cores is a typo; launch also holds two pipes per rank, and
// the usual open-file limit is 1024.
constexpr int kMaxRanks = 1024;
constexpr double kMaxGraceSeconds = 3600;
using kiln::distributed::kMaxRestartCount;

bool AllOf(absl::string_view s, absl::string_view allowed) {
  return !s.empty() && s.find_first_not_of(allowed) == absl::string_view::npos;
}

// Seconds as a plain decimal in 0..max, which also keeps out nan, inf, exponents and signs.
bool ParseSeconds(absl::string_view arg, double max, double* seconds) {
  return AllOf(arg, "0123456789.") && absl::SimpleAtod(arg, seconds) && *seconds >= 0 && *seconds <= max;
}

}  // namespace

// An argument as a message shows it: escaped, and cut so that a huge one gives a short line.
std::string Quote(absl::string_view value) {
  constexpr size_t kShown = 64;
  if (value.size() <= kShown) return absl::StrCat("'", absl::CHexEscape(value), "'");
  return absl::StrCat("'", absl::CHexEscape(value.substr(0, kShown)), "'... (", value.size(), " bytes)");
}

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "launch: %s\nusage: launch --nproc=N [--rendezvous=file:///dir|redis://host:port] "
               "[--grace=SECONDS] [--max_restarts=R] [--restart_backoff=SECONDS] [--] program [args...]\n",
               why.c_str());
  std::exit(2);
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  int i = 1;
  for (; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (!absl::StartsWith(arg, "--")) break;
    if (absl::ConsumePrefix(&arg, "--nproc=")) {
      // Digits only: SimpleAtoi would take " 2" and "+2" too.
      if (!AllOf(arg, "0123456789") || !absl::SimpleAtoi(arg, &o.nproc) || o.nproc < 1 || o.nproc > kMaxRanks) {
        Usage(absl::StrCat("--nproc=", Quote(arg), ": expected a whole number of ranks in 1..", kMaxRanks));
      }
    } else if (absl::ConsumePrefix(&arg, "--rendezvous=")) {
      o.rendezvous = std::string(arg);
      if (absl::Status s = kiln::distributed::CheckRendezvousAddress(o.rendezvous); !s.ok()) {
        Usage(absl::StrCat("--rendezvous: ", s.message()));
      }
    } else if (absl::ConsumePrefix(&arg, "--grace=")) {
      if (!ParseSeconds(arg, kMaxGraceSeconds, &o.grace)) {
        Usage(absl::StrCat("--grace=", Quote(arg), ": expected seconds in 0..", kMaxGraceSeconds,
                           " (a decimal number such as 2.5)"));
      }
    } else if (absl::ConsumePrefix(&arg, "--max_restarts=")) {
      if (!AllOf(arg, "0123456789") || !absl::SimpleAtoi(arg, &o.max_restarts) || o.max_restarts > kMaxRestartCount) {
        Usage(absl::StrCat("--max_restarts=", Quote(arg), ": expected a whole number of restarts in 0..",
                           kMaxRestartCount));
      }
    } else if (absl::ConsumePrefix(&arg, "--restart_backoff=")) {
      if (!ParseSeconds(arg, kMaxRestartBackoffSeconds, &o.restart_backoff)) {
        Usage(absl::StrCat("--restart_backoff=", Quote(arg), ": expected seconds in 0..", kMaxRestartBackoffSeconds,
                           " (a decimal number such as 0.5)"));
      }
    } else {
      Usage(absl::StrCat("unknown flag ", Quote(arg)));
    }
  }
  if (o.nproc == 0) Usage("--nproc is required");
  for (; i < argc; ++i) o.command.push_back(argv[i]);
  if (o.command.empty()) Usage("no program to run");
  return o;
}

}  // namespace kiln::launch
