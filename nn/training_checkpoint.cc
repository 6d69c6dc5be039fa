#include "nn/training_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace kiln::nn {
namespace {

constexpr char kModelFile[] = "model.safetensors";
constexpr char kStateFile[] = "training_state.safetensors";
constexpr char kStepPrefix[] = "step-";
constexpr int kStepDigits = 12;
constexpr char kTempPrefix[] = ".writing-step-";  // what an interrupted write leaves

absl::Status Errno(const std::string& what) { return absl::ErrnoToStatus(errno, what); }

// The step of a complete checkpoint's directory name, or -1 for any other name.
int64_t StepOf(const std::string& name) {
  const size_t prefix = sizeof(kStepPrefix) - 1;
  if (name.size() != prefix + kStepDigits || name.compare(0, prefix, kStepPrefix) != 0) return -1;
  int64_t step = 0;
  for (size_t i = prefix; i < name.size(); ++i) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(name[i]))) return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

// Complete checkpoints in `dir` (directories, not links), oldest first.
absl::StatusOr<std::vector<std::pair<int64_t, std::string>>> ListCheckpoints(const std::string& dir,
                                                                             std::vector<std::string>* leftovers) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) return absl::NotFoundError(absl::StrCat("cannot read checkpoint folder ", dir, ": ", error.message()));
  std::vector<std::pair<int64_t, std::string>> out;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (leftovers != nullptr && name.rfind(kTempPrefix, 0) == 0) leftovers->push_back(entry.path().string());
    const int64_t step = StepOf(name);
    if (step >= 0 && entry.is_directory(error) && !entry.is_symlink(error)) out.emplace_back(step, entry.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(absl::StrCat("cannot open ", dir));
  const int rc = fsync(fd);
  close(fd);
  return rc == 0 ? absl::OkStatus() : Errno(absl::StrCat("cannot flush ", dir));
}

}  // namespace

absl::StatusOr<std::vector<uint64_t>> StreamStates(const std::map<std::string, std::string>& metadata,
                                                   const std::vector<std::pair<std::string, Generator*>>& streams,
                                                   const std::string& path) {
  std::vector<uint64_t> states;
  for (const auto& [name, g] : streams) {
    const auto it = metadata.find(kStreamPrefix + name);
    uint64_t v = 0;
    const bool digits = it != metadata.end() && !it->second.empty() && it->second.size() <= 20 &&
                        std::all_of(it->second.begin(), it->second.end(),
                                    [](char c) { return absl::ascii_isdigit(static_cast<unsigned char>(c)); });
    if (!digits || !absl::SimpleAtoi(it->second, &v)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": the training state has no valid state for random stream ",
                                                     name, " (metadata ", kStreamPrefix, name, ")"));
    }
    states.push_back(v);
  }
  return states;
}

std::string TrainingCheckpointPath(const std::string& dir, int64_t step) {
  return absl::StrFormat("%s/%s%0*d", dir, kStepPrefix, kStepDigits, step);
}

absl::Status CheckCheckpointDir(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("the checkpoint folder is empty");
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Errno(absl::StrCat("cannot create checkpoint folder ", dir));
  }
  return CheckWritable(absl::StrCat(dir, "/", kModelFile));
}

absl::Status WriteTrainingCheckpoint(const std::string& dir, int64_t step, const TrainingCheckpoint& checkpoint) {
  if (step < 0 || step >= 1'000'000'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", step, " is not in [0, 10^12)"));
  }
  if (absl::Status s = CheckCheckpointDir(dir); !s.ok()) return s;
  std::string temp = absl::StrCat(dir, "/", kTempPrefix, step, "-XXXXXX");
  if (mkdtemp(temp.data()) == nullptr) return Errno(absl::StrCat("cannot write a checkpoint in ", dir));
  std::error_code ignored;
  absl::Status status = WriteSafetensors(absl::StrCat(temp, "/", kModelFile), checkpoint.model);
  if (status.ok()) status = WriteSafetensors(absl::StrCat(temp, "/", kStateFile), checkpoint.state);
  const std::string final_path = TrainingCheckpointPath(dir, step);
  if (status.ok() && rename(temp.c_str(), final_path.c_str()) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) {  // the same step again: move the old one aside first
      std::string old = absl::StrCat(dir, "/", kTempPrefix, step, "-old-XXXXXX");
      if (mkdtemp(old.data()) == nullptr || rename(final_path.c_str(), old.c_str()) != 0 ||
          rename(temp.c_str(), final_path.c_str()) != 0) {
        status = Errno(absl::StrCat("cannot replace ", final_path));
      }
      std::filesystem::remove_all(old, ignored);
    } else {
      status = Errno(absl::StrCat("cannot rename ", temp, " to ", final_path));
    }
  }
  if (!status.ok()) {
    std::filesystem::remove_all(temp, ignored);
    return status;
  }
  return SyncDirectory(dir);
}

absl::Status PruneTrainingCheckpoints(const std::string& dir, int keep) {
  std::vector<std::string> leftovers;
  auto list = ListCheckpoints(dir, &leftovers);
  if (!list.ok()) return list.status();
  std::error_code error;
  for (const std::string& path : leftovers) std::filesystem::remove_all(path, error);
  for (size_t i = 0; i + std::max(keep, 1) < list->size(); ++i) {
    if (std::filesystem::remove_all((*list)[i].second, error) == static_cast<std::uintmax_t>(-1)) {
      return absl::InternalError(absl::StrCat("cannot remove ", (*list)[i].second, ": ", error.message()));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> LatestTrainingCheckpoint(const std::string& dir) {
  auto list = ListCheckpoints(dir, nullptr);
  if (!list.ok()) return list.status();
  if (list->empty()) return absl::NotFoundError(absl::StrCat("no complete checkpoint (step-N folder) in ", dir));
  return list->back().second;
}

absl::StatusOr<TrainingCheckpoint> ReadTrainingCheckpoint(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return Errno(absl::StrCat("cannot read checkpoint ", path));
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a checkpoint folder (one with ", kModelFile, " and ",
                                                   kStateFile, ", as --checkpoint_dir writes)"));
  }
  TrainingCheckpoint c;
  auto model = ReadSafetensors(absl::StrCat(path, "/", kModelFile));
  if (!model.ok()) return model.status();
  auto state = ReadSafetensors(absl::StrCat(path, "/", kStateFile));
  if (!state.ok()) return state.status();
  const auto format = state->metadata.find("format");
  if (format == state->metadata.end() || format->second != kTrainingStateFormat) {
    return absl::InvalidArgumentError(absl::StrCat(path, "/", kStateFile, " is not a kiln training state (format ",
                                                   format == state->metadata.end() ? "missing" : format->second,
                                                   ", expected ", kTrainingStateFormat, ")"));
  }
  c.model = *std::move(model);
  c.state = *std::move(state);
  return c;
}

}  // namespace kiln::nn
