// tools/consolidate_checkpoint: turns a sharded checkpoint folder (docs/sharded_checkpoints.md)
// into one model.safetensors holding the model's parameters, whole (no optimizer state): the
// file PyTorch's load_state_dict(strict=True) takes. Progress on stderr, one JSON line on
// stdout at the end. Exit 0 when written, 2 on bad input (naming the problem: a missing or
// damaged shard, an index that does not cover the model, an --out that exists), 1 on a runtime
// failure (out of memory, a disk that fails).
//
//   consolidate_checkpoint --in=DIR --out=FILE
#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "nn/shard_consolidate.h"

namespace {

constexpr char kUsage[] = "usage: consolidate_checkpoint --in=DIR --out=FILE";

int Fail(const std::string& message, int code) {
  std::fprintf(stderr, "consolidate_checkpoint: %s\n", message.c_str());
  return code;
}

int Help() {
  std::printf(
      "%s\n"
      "Writes the parameters of the sharded checkpoint in DIR (a folder with index.json and its\n"
      "shard-<g>-of-<N>.safetensors files) to FILE as one safetensors file of whole tensors, as an\n"
      "unsharded checkpoint's model.safetensors holds them. Every chunk read is checked against the\n"
      "index's CRC-32C. FILE must not exist. Exit 0 when written, 2 on bad input, 1 on a runtime failure.\n",
      kUsage);
  return 0;
}

// Damaged or wrong input is the caller's to fix (2); a machine that fails is not (1).
int ExitCodeOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kUnknown: return 1;
    default: return 2;
  }
}

int Run(int argc, char** argv) {
  std::string in, out;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") return Help();
    if (absl::ConsumePrefix(&arg, "--in=")) {
      in = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--out=")) {
      out = std::string(arg);
    } else {
      return Fail(absl::StrCat("unknown argument ", arg, "; ", kUsage), 2);
    }
  }
  if (in.empty() || out.empty()) return Fail(absl::StrCat("--in and --out are both needed; ", kUsage), 2);
  const auto start = std::chrono::steady_clock::now();
  auto model =
      kiln::nn::ConsolidateShardedCheckpoint(in, out, [](const std::string& name, int64_t done, int64_t total) {
        std::fprintf(stderr, "consolidate_checkpoint: [%lld/%lld] %s\n", static_cast<long long>(done),
                     static_cast<long long>(total), name.c_str());
      });
  if (!model.ok()) return Fail(std::string(model.status().message()), ExitCodeOf(model.status()));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const nlohmann::json summary = {{"in", in},
                                  {"out", out},
                                  {"world_size", model->world},
                                  {"stage", model->stage},
                                  {"parameters", model->tensors},
                                  {"elements", model->elements},
                                  {"bytes", model->bytes},
                                  {"seconds", seconds}};
  std::printf("%s\n", summary.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) return Fail("cannot write the summary to stdout", 1);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "consolidate_checkpoint: out of memory (the model's parameters must fit in memory)\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "consolidate_checkpoint: %s\n", e.what());
  }
  return 1;
}
