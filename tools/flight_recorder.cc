// tools/flight_recorder: merges the ranks' flight recorder dumps (a folder, or files) into one
// timeline per device group and names the first call at which the ranks diverged; the last
// line is one JSON object. Exit 0 with a report, 2 on bad input (naming the file).
//
//   flight_recorder [--tail=N] DIR_OR_DUMP...
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "distributed/flight_dump.h"
#include "nn/file_io.h"
#include "tools/flight_merge.h"

namespace {

constexpr uint64_t kMaxDumpBytes = uint64_t{1} << 30;

int Fail(const std::string& message) {
  std::fprintf(stderr, "flight_recorder: %s\n", message.c_str());
  return 2;
}

// The dumps in a folder: its regular files named *.json, in name order.
bool ListDumps(const std::string& dir, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return false;
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (absl::EndsWith(name, ".json") && name[0] != '.') names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) out->push_back(absl::StrCat(dir, "/", n));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int tail = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (absl::ConsumePrefix(&arg, "--tail=")) {
      if (!absl::SimpleAtoi(arg, &tail) || tail < 0) return Fail(absl::StrCat("--tail=", arg, " is not a count"));
      continue;
    }
    if (absl::StartsWith(arg, "-"))
      return Fail(absl::StrCat("unknown flag ", arg, "; usage: flight_recorder [--tail=N] DIR_OR_DUMP..."));
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      const size_t before = files.size();
      if (!ListDumps(argv[i], &files)) return Fail(absl::StrCat(arg, ": cannot read the folder"));
      if (files.size() == before) return Fail(absl::StrCat(arg, ": no *.json dumps in the folder"));
    } else {
      files.emplace_back(arg);
    }
  }
  if (files.empty()) return Fail("usage: flight_recorder [--tail=N] DIR_OR_DUMP...");
  std::vector<kiln::tools::NamedDump> dumps;
  for (const std::string& file : files) {
    absl::StatusOr<kiln::nn::InputFile> in = kiln::nn::InputFile::Open(file);
    if (!in.ok()) return Fail(absl::StrCat(file, ": ", in.status().message()));
    if (in->size() > kMaxDumpBytes) return Fail(absl::StrCat(file, ": ", in->size(), " bytes is too large for a dump"));
    std::string bytes(in->size(), '\0');
    if (absl::Status s = in->ReadAt(0, bytes.data(), bytes.size()); !s.ok())
      return Fail(absl::StrCat(file, ": ", s.message()));
    absl::StatusOr<kiln::distributed::FlightDump> dump = kiln::distributed::ParseFlightDump(bytes);
    if (!dump.ok()) return Fail(absl::StrCat(file, ": not a flight recorder dump: ", dump.status().message()));
    dumps.push_back({file, *std::move(dump)});
  }
  absl::StatusOr<std::string> report = kiln::tools::MergeFlightDumps(dumps, tail);
  if (!report.ok()) return Fail(std::string(report.status().message()));
  std::fputs(report->c_str(), stdout);
  return 0;
}
