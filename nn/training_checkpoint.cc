#include "nn/training_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "nlohmann/json.hpp"
#include "nn/file_io.h"
#include "tensor/crc32c.h"

namespace kiln::nn {
namespace {

constexpr char kModelFile[] = "model.safetensors";
constexpr char kStateFile[] = "training_state.safetensors";
constexpr char kStepPrefix[] = "step-";
constexpr int kStepDigits = 12;
constexpr char kTempPrefix[] = ".writing-step-";          // what an interrupted write leaves
constexpr char kShardIndexFileName[] = "index.json";      // nn/shard_index.h's kShardIndexFile
constexpr uint64_t kMaxIndexBytes = uint64_t{256} << 20;  // as nn/shard_index.cc

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

// The step-N folders in `dir` (directories, not links), oldest first, and what interrupted
// writes left.
absl::StatusOr<std::vector<CheckpointEntry>> List(const std::string& dir, std::vector<std::string>* leftovers) {
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) return absl::NotFoundError(absl::StrCat("cannot read checkpoint folder ", dir, ": ", error.message()));
  std::vector<CheckpointEntry> out;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (leftovers != nullptr && name.rfind(kTempPrefix, 0) == 0) leftovers->push_back(entry.path().string());
    const int64_t step = StepOf(name);
    if (step >= 0 && entry.is_directory(error) && !entry.is_symlink(error)) out.push_back({step, entry.path()});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.step < b.step; });
  return out;
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return Errno(absl::StrCat("cannot open ", dir));
  const int rc = fsync(fd);
  close(fd);
  return rc == 0 ? absl::OkStatus() : Errno(absl::StrCat("cannot flush ", dir));
}

void AddToChecksum(uint32_t& crc, absl::string_view text) {
  crc = Crc32c(crc, text);
  crc = Crc32c(crc, "", 1);  // a terminator, so that ("ab", "c") and ("a", "bc") differ
}

void AddToChecksum(uint32_t& crc, const TensorFile& file) {
  for (const auto& [key, value] : file.metadata) {
    if (key == kChecksumKey) continue;
    AddToChecksum(crc, key);
    AddToChecksum(crc, value);
  }
  for (const auto& [name, data] : file.tensors) {
    AddToChecksum(crc, name);
    AddToChecksum(crc, DTypeName(data.dtype()));
    AddToChecksum(crc, data.shape().ToString());
    crc = Crc32c(crc, data.raw(), data.nbytes());
  }
}

std::string ChecksumText(uint32_t crc) { return absl::StrFormat("%08x", crc); }

// Moves the step folder at `path` aside, under a name no listing takes for a checkpoint.
absl::Status KeepAside(const std::string& path) {
  std::string kept = absl::StrCat(path, ".kept-XXXXXX");
  if (mkdtemp(kept.data()) == nullptr || rename(path.c_str(), kept.c_str()) != 0) {
    return Errno(absl::StrCat("cannot move ", path, " aside"));
  }
  std::fprintf(stderr, "checkpoint: %s was written by another run (or is no readable checkpoint): kept as %s\n",
               path.c_str(), kept.c_str());
  return absl::OkStatus();
}

// Puts the complete folder `temp` in place of `final_path`, which this run wrote before.
absl::Status Replace(const std::string& temp, const std::string& final_path) {
  if (renameat2(AT_FDCWD, temp.c_str(), AT_FDCWD, final_path.c_str(), RENAME_EXCHANGE) == 0) {
    std::error_code ignored;
    std::filesystem::remove_all(temp, ignored);  // now the old one
    return absl::OkStatus();
  }
  // A file system without the atomic exchange: the old one aside first, briefly no step-N.
  std::string old = absl::StrCat(temp, "-old-XXXXXX");  // a leftover's name, should this stop here
  if (mkdtemp(old.data()) == nullptr || rename(final_path.c_str(), old.c_str()) != 0 ||
      rename(temp.c_str(), final_path.c_str()) != 0) {
    return Errno(absl::StrCat("cannot replace ", final_path));
  }
  std::error_code ignored;
  std::filesystem::remove_all(old, ignored);
  return absl::OkStatus();
}

// The run a sharded checkpoint's index names (docs/sharded_checkpoints.md; parsed fully by
// nn/shard_index.h, which builds on this library): NotFound when `path` has no index.
absl::StatusOr<std::string> ShardedCheckpointRun(const std::string& path) {
  const std::string file = absl::StrCat(path, "/", kShardIndexFileName);
  absl::StatusOr<InputFile> in = InputFile::Open(file);
  if (!in.ok()) {
    if (!absl::IsNotFound(in.status())) return in.status();
    return absl::NotFoundError(absl::StrCat(path, " has neither ", kStateFile, " nor ", kShardIndexFileName,
                                            " (a sharded checkpoint whose writing was interrupted has no index)"));
  }
  std::string text(std::min<uint64_t>(in->size(), kMaxIndexBytes), '\0');
  if (absl::Status s = in->ReadAt(0, text.data(), text.size()); !s.ok()) return s;
  const nlohmann::json index = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  const auto run = index.is_object() ? index.find("metadata") : index.end();
  if (run == index.end() || !run->is_object() || !run->contains(kRunKey) || !(*run)[kRunKey].is_string() ||
      (*run)[kRunKey].get<std::string>().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(file, " is no sharded checkpoint index naming its run"));
  }
  return (*run)[kRunKey].get<std::string>();
}

}  // namespace

std::string NewRunId() {
  std::random_device device;  // getrandom(2) on Linux
  const uint64_t id = (static_cast<uint64_t>(device()) << 32) | device();
  return absl::StrFormat("%016x", id);
}

uint32_t ChecksumOf(const TrainingCheckpoint& checkpoint) {
  uint32_t crc = 0;
  AddToChecksum(crc, checkpoint.model);
  AddToChecksum(crc, checkpoint.state);
  return crc;
}

absl::StatusOr<std::vector<CheckpointEntry>> ListTrainingCheckpoints(const std::string& dir) {
  return List(dir, nullptr);
}

absl::StatusOr<std::string> TrainingCheckpointRun(const std::string& path) {
  const std::string file = absl::StrCat(path, "/", kStateFile);
  if (struct stat st; lstat(file.c_str(), &st) != 0 && errno == ENOENT) return ShardedCheckpointRun(path);
  auto metadata = ReadSafetensorsMetadata(file);
  if (!metadata.ok()) return metadata.status();
  const auto format = metadata->find("format");
  const auto run = metadata->find(kRunKey);
  if (format == metadata->end() || format->second != kTrainingStateFormat || run == metadata->end() ||
      run->second.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, " is no kiln training state of format ", kTrainingStateFormat, " naming its run"));
  }
  return run->second;
}

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

absl::Status WriteTrainingCheckpoint(const std::string& dir, int64_t step, TrainingCheckpoint checkpoint) {
  if (step < 0 || step >= 1'000'000'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", step, " is not in [0, 10^12)"));
  }
  const auto run = checkpoint.state.metadata.find(kRunKey);
  if (run == checkpoint.state.metadata.end() || run->second.empty()) {
    return absl::InvalidArgumentError("a training checkpoint must name its run (metadata \"run\")");
  }
  checkpoint.state.metadata[kChecksumKey] = ChecksumText(ChecksumOf(checkpoint));
  absl::StatusOr<std::string> made = NewCheckpointFolder(dir, step);
  if (!made.ok()) return made.status();
  const std::string& temp = *made;
  std::error_code ignored;
  absl::Status status = WriteSafetensors(absl::StrCat(temp, "/", kModelFile), checkpoint.model);
  if (status.ok()) status = WriteSafetensors(absl::StrCat(temp, "/", kStateFile), checkpoint.state);
  if (!status.ok()) {
    std::filesystem::remove_all(temp, ignored);
    return status;
  }
  return PlaceTrainingCheckpoint(dir, step, temp, run->second);
}

absl::Status PlaceTrainingCheckpoint(const std::string& dir, int64_t step, const std::string& temp,
                                     const std::string& run) {
  const std::string final_path = TrainingCheckpointPath(dir, step);
  absl::Status status;
  if (rename(temp.c_str(), final_path.c_str()) != 0) {
    if (errno == EEXIST || errno == ENOTEMPTY) {  // step-N is there already
      const auto owner = TrainingCheckpointRun(final_path);
      if (owner.ok() && *owner == run) {
        status = Replace(temp, final_path);
      } else {
        status = KeepAside(final_path);
        if (status.ok() && rename(temp.c_str(), final_path.c_str()) != 0) {
          status = Errno(absl::StrCat("cannot rename ", temp, " to ", final_path));
        }
      }
    } else {
      status = Errno(absl::StrCat("cannot rename ", temp, " to ", final_path));
    }
  }
  if (!status.ok()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp, ignored);
    return status;
  }
  return SyncDirectory(dir);
}

absl::StatusOr<std::string> NewCheckpointFolder(const std::string& dir, int64_t step) {
  if (step < 0 || step >= 1'000'000'000'000) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint step ", step, " is not in [0, 10^12)"));
  }
  if (absl::Status s = CheckCheckpointDir(dir); !s.ok()) return s;
  std::string temp = absl::StrCat(dir, "/", kTempPrefix, step, "-XXXXXX");
  if (mkdtemp(temp.data()) == nullptr) return Errno(absl::StrCat("cannot write a checkpoint in ", dir));
  return temp;
}

absl::Status PruneTrainingCheckpoints(const std::string& dir, int keep, const std::string& run) {
  std::vector<std::string> leftovers;
  auto list = List(dir, &leftovers);
  if (!list.ok()) return list.status();
  std::error_code error;
  for (const std::string& path : leftovers) std::filesystem::remove_all(path, error);
  std::vector<std::string> own;  // oldest first
  for (const CheckpointEntry& entry : *list) {
    const auto owner = TrainingCheckpointRun(entry.path);
    if (owner.ok() && *owner == run) own.push_back(entry.path);
  }
  for (size_t i = 0; i + std::max(keep, 1) < own.size(); ++i) {
    // Renamed to a leftover's name first: a removal cut short must not leave a step-N folder
    // that is no longer complete.
    std::string doomed = absl::StrCat(dir, "/", kTempPrefix, "removed-XXXXXX");
    if (mkdtemp(doomed.data()) == nullptr || rename(own[i].c_str(), doomed.c_str()) != 0) {
      return Errno(absl::StrCat("cannot remove ", own[i]));
    }
    if (std::filesystem::remove_all(doomed, error) == static_cast<std::uintmax_t>(-1)) {
      return absl::InternalError(absl::StrCat("cannot remove ", own[i], " (moved to ", doomed, "): ", error.message()));
    }
  }
  return absl::OkStatus();
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
  const auto recorded = c.state.metadata.find(kChecksumKey);
  const std::string computed = ChecksumText(ChecksumOf(c));
  if (recorded == c.state.metadata.end() || recorded->second != computed) {
    return absl::DataLossError(absl::StrCat(
        path, ": the checkpoint's files were changed or damaged after they were written (crc32c ",
        recorded == c.state.metadata.end() ? "missing" : absl::StrCat("recorded ", recorded->second.substr(0, 16)),
        ", computed ", computed, ")"));
  }
  if (const auto run = c.state.metadata.find(kRunKey); run == c.state.metadata.end() || run->second.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(path, "/", kStateFile, " does not name the run that wrote it"));
  }
  return c;
}

}  // namespace kiln::nn
