// tools/flight_recorder: merges the ranks' flight recorder dumps (a folder, or files) into one
// timeline per device group and names the first call at which the ranks diverged; the last
// line is one JSON object. Exit 0 with a report, 2 on bad input (naming the file), 1 on a
// runtime failure (out of memory, a report that cannot be written).
//
//   flight_recorder [--tail=N] DIR_OR_DUMP...
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nn/file_io.h"
#include "tools/flight_merge.h"

namespace {

// What one run reads, all dumps together, checked against their sizes before reading any. The
// merge's memory follows the input's size (FlightMerge keeps a call, 132 bytes or more in a
// file, in 56), so this bounds it too.
constexpr uint64_t kMaxInputBytes = uint64_t{1} << 30;

constexpr char kUsage[] = "usage: flight_recorder [--tail=N] DIR_OR_DUMP...";

int Fail(const std::string& message) {
  std::fprintf(stderr, "flight_recorder: %s\n", message.c_str());
  return 2;
}

int Help() {
  std::printf(
      "%s\n"
      "Merges the ranks' flight recorder dumps (every *.json of a folder, or the files named) into one\n"
      "timeline per device group, names the first call at which the ranks diverged, and ends with one\n"
      "JSON line.\n"
      "  --tail=N  the last N calls of each timeline (default: all)\n"
      "Reads at most %llu bytes (1 GiB) of dumps in all, the files together, and refuses more before\n"
      "reading any (so at most about 8 million calls: one takes 132 bytes or more); at most %d members\n"
      "(ranks times members each) in all. Dumps stream in and each call is kept in 56 bytes, its\n"
      "texts once however many calls share them: memory is about 0.3x the dumps' size as the recorder\n"
      "writes them, 0.6x for the smallest calls with every text distinct (the worst case measured).\n"
      "Exit 0 with a report, 2 on bad input (naming the file), 1 on a runtime failure.\n",
      kUsage, static_cast<unsigned long long>(kMaxInputBytes), kiln::tools::FlightMerge::kMaxMembers);
  return 0;
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

std::string TooLarge(const std::string& file, uint64_t total) {
  return absl::StrCat(file, ": the dumps come to ", total, " bytes or more, over the ", kMaxInputBytes,
                      " (1 GiB) this tool reads in one run; merge fewer dumps at a time");
}

int Run(int argc, char** argv) {
  int tail = 0;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return Help();
    if (absl::ConsumePrefix(&arg, "--tail=")) {
      if (!absl::SimpleAtoi(arg, &tail) || tail < 0) return Fail(absl::StrCat("--tail=", arg, " is not a count"));
      continue;
    }
    if (absl::StartsWith(arg, "-")) return Fail(absl::StrCat("unknown flag ", arg, "; ", kUsage));
    struct stat st;
    if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
      const size_t before = files.size();
      if (!ListDumps(argv[i], &files)) return Fail(absl::StrCat(arg, ": cannot read the folder"));
      if (files.size() == before) return Fail(absl::StrCat(arg, ": no *.json dumps in the folder"));
    } else {
      files.emplace_back(arg);
    }
  }
  if (files.empty()) return Fail(kUsage);
  // Every size first, so that too much input is refused before anything is read.
  uint64_t total = 0;
  for (const std::string& file : files) {
    absl::StatusOr<kiln::nn::InputFile> in = kiln::nn::InputFile::Open(file);
    if (!in.ok()) return Fail(absl::StrCat(file, ": ", in.status().message()));
    total += in->size();
    if (total > kMaxInputBytes) return Fail(TooLarge(file, total));
  }
  kiln::tools::FlightMerge merge;
  uint64_t read_so_far = 0;
  for (const std::string& file : files) {
    absl::StatusOr<kiln::nn::InputFile> in = kiln::nn::InputFile::Open(file);
    if (!in.ok()) return Fail(absl::StrCat(file, ": ", in.status().message()));
    // A file that grew since it was measured is read only as far as the bound.
    if (read_so_far + in->size() > kMaxInputBytes) return Fail(TooLarge(file, read_so_far + in->size()));
    read_so_far += in->size();
    uint64_t offset = 0;
    absl::Status s = merge.Add(file, [&](char* buf, size_t size) -> absl::StatusOr<size_t> {
      const uint64_t n = std::min<uint64_t>(size, in->size() - offset);
      if (absl::Status r = in->ReadAt(offset, buf, n); !r.ok()) return r;
      offset += n;
      return static_cast<size_t>(n);
    });
    if (!s.ok()) return Fail(std::string(s.message()));
  }
  merge.Write(tail, [](absl::string_view piece) { std::fwrite(piece.data(), 1, piece.size(), stdout); });
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "flight_recorder: cannot write the report to stdout\n");
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "flight_recorder: out of memory (the dumps need more than this machine gives)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flight_recorder: %s\n", e.what());
  }
  return 1;
}
