#include "examples/memory_budget.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "distributed/process/launch_env.h"
#include "examples/process_memory.h"
#include "examples/run_setup.h"

namespace kiln {
namespace {

constexpr double kKiB = 1024, kMiB = kKiB * 1024, kGiB = kMiB * 1024;

// A cgroup path as the kernel writes it: absolute, without "." or ".." parts.
std::optional<std::string> CleanCgroupPath(absl::string_view path) {
  if (path.empty() || path[0] != '/') return std::nullopt;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    if (part == "." || part == "..") return std::nullopt;
  }
  return std::string(path);
}

// The limits of the cgroup at `path` and of each of its ancestors that `root` shows (inside a
// container, `root` is usually the container's own group and the path's upper parts are not
// there). `limit_file`/`usage_file`/`inactive_key` name the v1 or v2 files.
void AddCgroupLimits(const std::string& root, const std::string& path, const char* limit_file, const char* usage_file,
                     const char* inactive_key, std::vector<MemoryLimit>& out) {
  std::string dir = path == "/" ? "" : path;
  while (true) {
    const std::string folder = root + dir;
    const auto limit_text = ReadKernelFile(folder + "/" + limit_file);
    const auto limit = limit_text ? ParseCgroupBytes(*limit_text) : std::nullopt;
    if (limit && *limit != kUnlimited) {
      const auto usage_text = ReadKernelFile(folder + "/" + usage_file);
      int64_t used = usage_text ? ParseCgroupBytes(*usage_text).value_or(0) : 0;
      if (used == kUnlimited) used = 0;
      // The page cache counts as usage but is given back under pressure.
      if (const auto stat = ReadKernelFile(folder + "/memory.stat")) {
        used -= std::min(used, ParseStatField(*stat, inactive_key).value_or(0));
      }
      out.push_back({.what = absl::StrCat("cgroup ", folder, "/", limit_file), .limit = *limit, .used = used});
    }
    if (dir.empty()) break;
    dir.resize(dir.rfind('/'));
  }
}

void Add(std::vector<MemoryPart>& parts, std::string what, double bytes) {
  if (bytes > 0) parts.push_back({std::move(what), bytes});
}

// Bytes per activation value: f32, or mixed precision, where the matmuls' outputs are half but
// norms, softmax and the loss stay f32 (measured: 0.75-0.85 of the f32 peak).
double ActivationBytes(nn::Precision p) { return p == nn::Precision::kF32 ? 4 : 3.4; }

// Each process's share of a batch split over `members` devices, `devices` of them here.
double ProcessShare(int64_t batch, int64_t devices, int64_t members) {
  const int64_t m = std::max<int64_t>(members, 1);
  return static_cast<double>((batch + m - 1) / m) * static_cast<double>(std::max<int64_t>(devices, 1));
}

// Parameter-sized copies: the initial model (1) and, per device, its replica, gradients,
// AdamW's two moments, the gradient-sync bucket and the optimizer's temporaries (6.5, fitted).
// Sharded over `members`, a device keeps 1/members of the gradients and the moments, and its
// transients are bounded by one 4 MiB bucket (the sharded update goes bucket by bucket):
// 2.5 + 3/members, fitted. Under ZeRO-3 it keeps 1/members of everything (5.5/members with the
// update's temporaries), plus a few copies of the largest shard unit (`unit_share`: its share
// of the parameters): gathered, recomputed, its whole gradients and their packed bucket.
double ParameterCopies(int64_t devices, int64_t members, distributed::Sharding shard, double unit_share) {
  const double n = static_cast<double>(std::max<int64_t>(members, 1));
  const double per_device = shard == distributed::Sharding::kNone         ? 6.5
                            : shard == distributed::Sharding::kParameters ? 5.5 / n + 4 * unit_share
                                                                          : 2.5 + 3.0 / n;
  return 1 + per_device * static_cast<double>(std::max<int64_t>(devices, 1));
}

// The program, its libraries, thread stacks and the allocator's own (measured: 15 MiB for a
// tiny gpt, 20 MiB for train's without its data).
constexpr double kProgramBytes = 20 * kMiB;

}  // namespace

std::optional<int64_t> ParseMemAvailable(absl::string_view meminfo) { return ParseKibField(meminfo, "MemAvailable"); }
std::optional<int64_t> ParseVmSize(absl::string_view status) { return ParseKibField(status, "VmSize"); }

std::optional<int64_t> ParseStatField(absl::string_view stat, absl::string_view key) {
  for (absl::string_view line : absl::StrSplit(stat, '\n')) {
    if (!absl::ConsumePrefix(&line, key) || !absl::ConsumePrefix(&line, " ")) continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(line, &value) || value < 0) return std::nullopt;
    return value;
  }
  return std::nullopt;
}

std::optional<int64_t> ParseCgroupBytes(absl::string_view text) {
  text = absl::StripAsciiWhitespace(text);
  if (text == "max") return kUnlimited;
  uint64_t value = 0;
  if (text.empty() || text.size() > 20 || !absl::SimpleAtoi(text, &value)) return std::nullopt;
  // cgroup v1 writes "no limit" as 2^63 rounded down to a page (9223372036854771712).
  if (value >= (uint64_t{1} << 62)) return kUnlimited;
  return static_cast<int64_t>(value);
}

CgroupPaths ParseProcCgroup(absl::string_view text) {
  CgroupPaths paths;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    // hierarchy-id:controller,list:path (the path may itself hold ':').
    const size_t first = line.find(':');
    const size_t second = first == absl::string_view::npos ? first : line.find(':', first + 1);
    if (second == absl::string_view::npos) continue;
    const absl::string_view id = line.substr(0, first), controllers = line.substr(first + 1, second - first - 1);
    const auto path = CleanCgroupPath(line.substr(second + 1));
    if (!path) continue;
    if (id == "0" && controllers.empty()) {
      paths.unified = *path;
    } else {
      for (absl::string_view controller : absl::StrSplit(controllers, ',')) {
        if (controller == "memory") paths.memory = *path;
      }
    }
  }
  return paths;
}

std::vector<MemoryLimit> ReadMemoryLimits(const std::string& proc, const std::string& cgroup_root) {
  std::vector<MemoryLimit> limits;
  if (const auto meminfo = ReadKernelFile(proc + "/meminfo")) {
    if (const auto available = ParseMemAvailable(*meminfo)) {
      limits.push_back({.what = "MemAvailable", .limit = *available});
    }
  }
  const CgroupPaths paths = ParseProcCgroup(ReadKernelFile(proc + "/self/cgroup").value_or(""));
  // cgroup v2 where its hierarchy has the memory controller (mounted at the root, or at
  // unified/ beside v1's); v1's memory hierarchy otherwise.
  std::string v2_root = cgroup_root;
  auto controllers = ReadKernelFile(v2_root + "/cgroup.controllers");
  if (!controllers) controllers = ReadKernelFile((v2_root = cgroup_root + "/unified") + "/cgroup.controllers");
  const bool v2 = paths.unified && controllers &&
                  absl::StrContains(absl::StrCat(" ", absl::StripAsciiWhitespace(*controllers), " "), " memory ");
  if (v2) {
    AddCgroupLimits(v2_root, *paths.unified, "memory.max", "memory.current", "inactive_file", limits);
  } else if (paths.memory) {
    AddCgroupLimits(cgroup_root + "/memory", *paths.memory, "memory.limit_in_bytes", "memory.usage_in_bytes",
                    "total_inactive_file", limits);
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY && as.rlim_cur < uint64_t{INT64_MAX}) {
    const auto status = ReadKernelFile(proc + "/self/status");
    limits.push_back({.what = "ulimit -v (RLIMIT_AS)",
                      .limit = static_cast<int64_t>(as.rlim_cur),
                      .used = status ? ParseVmSize(*status).value_or(0) : 0,
                      .per_process = true});
  }
  return limits;
}

AvailableMemory LeastAvailable(std::vector<MemoryLimit> limits, int local_processes) {
  AvailableMemory a;
  a.local_processes = std::max(local_processes, 1);
  for (const MemoryLimit& l : limits) {
    a.bytes = std::min(a.bytes, l.per_process ? l.left() : l.left() / a.local_processes);
  }
  a.limits = std::move(limits);
  return a;
}

AvailableMemory ReadAvailableMemory() {
  const auto launch = distributed::ReadLaunchEnv();
  const int local = launch.ok() && launch->has_value() ? (*launch)->local_world_size : 1;
  return LeastAvailable(ReadMemoryLimits(), local);
}

std::string AvailableMemory::Describe() const {
  if (limits.empty()) return "no memory limit could be read";
  std::vector<std::string> each;
  for (const MemoryLimit& l : limits) {
    std::string s = absl::StrCat(l.what, " ", FormatBytes(static_cast<double>(l.limit)));
    if (l.used > 0) absl::StrAppend(&s, " with ", FormatBytes(static_cast<double>(l.used)), " in use");
    each.push_back(std::move(s));
  }
  std::string shared;
  if (local_processes > 1)
    shared = absl::StrCat("; shared by the run's ", local_processes, " processes on this machine");
  return absl::StrCat(FormatBytes(static_cast<double>(bytes)), " is available (the least of ",
                      absl::StrJoin(each, "; "), shared, ")");
}

double MemoryEstimate::total() const {
  double sum = 0;
  for (const MemoryPart& p : parts) sum += p.bytes;
  return sum;
}

std::string MemoryEstimate::Describe() const {
  std::vector<MemoryPart> biggest = parts;
  std::sort(biggest.begin(), biggest.end(), [](const auto& a, const auto& b) { return a.bytes > b.bytes; });
  if (biggest.size() > 3) biggest.resize(3);
  return absl::StrCat(FormatBytes(total()), " (",
                      absl::StrJoin(biggest, ", ",
                                    [](std::string* out, const MemoryPart& p) {
                                      absl::StrAppend(out, p.what, " ", FormatBytes(p.bytes));
                                    }),
                      ")");
}

// Fitted on an AMD EPYC (Zen 4, 2 cores, 23 GiB), glibc malloc, against the peak RSS of whole
// runs (--steps=1 --eval_batches=1) over 18 configurations from 16 MiB to 2.8 GiB: widths
// 16-1024, 0-8 layers, contexts 16-512, batches 4-256, 4-8 heads, 1-4 devices, f32/bf16/f16.
// Estimate / peak: 1.1-1.7 (e.g. batch 64, context 256, 2 layers, width 64: 878 MiB peak,
// 1282 MiB estimated; batch 8, context 64, width 1024, 1 layer: 549 and 649). Refitted for the
// fused attention and linear layers (2026-12-04, Intel Xeon): the attention keeps one map of
// weights instead of 3.5, its backward none, and a block ~20 width-sized values, not 30 (batch 64,
// context 256, 2 layers, width 64: 362 MiB peak).
MemoryEstimate EstimateGptMemory(const GptMemoryConfig& c) {
  const double d = static_cast<double>(c.width), s = static_cast<double>(c.context);
  const double h = static_cast<double>(c.heads), v = static_cast<double>(c.vocab);
  const double layers = static_cast<double>(c.layers);
  const double per_layer_params = 12 * d * d + 13 * d;
  const double params = (v + s) * d + layers * per_layer_params + 2 * d;
  const double act = ActivationBytes(c.precision);
  // Tokens this process runs forward and backward at once, over its devices.
  const double tokens = ProcessShare(c.batch, c.devices, c.members) * s;
  const double batch_tokens = static_cast<double>(c.batch) * s;
  const double devices = static_cast<double>(std::max<int64_t>(c.devices, 1));
  MemoryEstimate e;
  Add(e.parts, "the program", kProgramBytes);
  Add(e.parts, absl::StrFormat("parameters, gradients and AdamW moments (%.0f parameters)", params),
      params * 4 *
          ParameterCopies(c.devices, c.members, c.shard,
                          std::max(per_layer_params, params - layers * per_layer_params) / params));
  // What autograd keeps per block: ~20 width-sized values per token (norms, qkv, the attention's
  // output, the MLP's 4x width twice, residuals) and the attention weights, heads x context.
  const double block_activations = tokens * (20 * d + h * s) * act;
  if (c.recompute) {
    // Each block's input, and one block's activations while its forward is recomputed.
    Add(e.parts, "activations kept for backward", tokens * layers * d * 4 + (c.layers > 0 ? block_activations : 0));
  } else {
    Add(e.parts, "activations kept for backward", layers * block_activations);
  }
  Add(e.parts, "embeddings, logits and loss (batch x context x vocab)", tokens * (5 * d + 3 * v) * act);
  // One block's backward at a time (the attention's runs head by head in cache), and each
  // device's weight gradients of one block before they join the others.
  if (c.layers > 0) {
    Add(e.parts, "backward's temporaries", tokens * 8 * d * act + devices * 3 * per_layer_params * 4);
  }
  // Validation runs whole batches of --batch_size on one device without gradients, one batch
  // of the --eval_batches at a time; what the step's threads freed is not all reused.
  const double forward_per_token = c.layers > 0 ? h * s + 8 * d + 3 * v : d + v;
  if (c.eval_batches > 0) Add(e.parts, "validation forward", batch_tokens * forward_per_token * act);
  if (c.sample > 0) Add(e.parts, "sampling", s * forward_per_token * 4 + static_cast<double>(c.sample) * 9);
  // The corpus and its train/validation copies; each step's windows as vectors and tensors.
  Add(e.parts, "the corpus", 2 * static_cast<double>(c.corpus_bytes) + batch_tokens * 8 * 6);
  return e;
}

// Fitted like EstimateGptMemory over 7 runs of an epoch (batches 64-30000, 64-2048 images):
// estimate / peak 1.25-1.31 (mlp: 449-788 MiB), 1.20-1.35 (cnn: 807-2578 MiB).
MemoryEstimate EstimateTrainMemory(const TrainMemoryConfig& c) {
  constexpr double kTrainImages = 60000, kTestImages = 10000, kPixels = 784;
  const bool cnn = c.model == "cnn";
  const double params = cnn ? 206922 : 269322;  // the two models of examples/train
  const double images =
      c.train_limit > 0 ? std::min<double>(kTrainImages, static_cast<double>(c.train_limit)) : kTrainImages;
  const int64_t batch = static_cast<int64_t>(std::min(images, static_cast<double>(c.batch)));
  const double scale = ActivationBytes(c.precision) / 4;
  // Per image in a step, forward and backward (the batch's copy included): measured 11.6 KiB
  // (mlp) and 0.9 MiB (cnn: two convolutions' im2col and their gradients).
  const double per_image = (cnn ? 1.05 * kMiB : 16 * kKiB) * scale;
  // Evaluation: 1000 test images at a time, without gradients (measured ~0.36 MiB each, cnn).
  const double per_eval_image = (cnn ? 0.4 * kMiB : 8 * kKiB) * scale;
  MemoryEstimate e;
  Add(e.parts, "the program", kProgramBytes);
  // Every image as i32 from the file, as f32, and as the tensor trained on (the i32 copy is
  // freed part way: 2.5).
  Add(e.parts, "Fashion-MNIST in memory",
      2.5 * (kTrainImages + kTestImages) * kPixels * 4 + 2 * (kTrainImages + kTestImages) * 8);
  Add(e.parts, "parameters, gradients and optimizer state",
      params * 4 * ParameterCopies(c.devices, c.members, c.shard, 1.0));  // a Sequential's layer: at most all
  Add(e.parts, "a step's activations (batch x per-image activations)",
      ProcessShare(batch, c.devices, c.members) * per_image);
  Add(e.parts, "evaluation", 1000 * per_eval_image);
  return e;
}

int64_t CorpusBytes(const std::string& dir) {
  DIR* folder = opendir(dir.c_str());
  if (folder == nullptr) return 0;
  int64_t total = 0;
  while (const dirent* entry = readdir(folder)) {
    struct stat st {};
    const std::string path = absl::StrCat(dir, "/", entry->d_name);
    if (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode)) total += st.st_size;
  }
  closedir(folder);
  return std::min<int64_t>(total, int64_t{1} << 30);
}

void CheckMemory(const MemoryEstimate& estimate, const AvailableMemory& available) {
  if (available.bytes == kUnlimited || estimate.total() <= static_cast<double>(available.bytes)) return;
  throw UsageError{absl::StrCat("this configuration needs about ", estimate.Describe(), "; ", available.Describe(),
                                ": make the model or the batch smaller")};
}

std::string FormatBytes(double bytes) {
  if (bytes >= kGiB) return absl::StrFormat("%.1f GiB", bytes / kGiB);
  if (bytes >= kMiB) return absl::StrFormat("%.1f MiB", bytes / kMiB);
  return absl::StrFormat("%.1f KiB", bytes / kKiB);
}

}  // namespace kiln
