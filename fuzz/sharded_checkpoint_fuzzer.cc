// A sharded checkpoint folder whose index.json holds any bytes: the run lookup that pruning and
// --resume=latest use (nn::TrainingCheckpointRun), the examples' index read with its metadata
// checksum, and the check that it covers a model, never crash; an error names the folder, and
// an index both readers accept names the same run.
#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "examples/sharded_checkpoint.h"
#include "nn/training_checkpoint.h"

namespace {

const std::string& Folder() {
  static const std::string folder = [] {
    std::string dir = "/tmp/sharded_checkpoint_fuzzer-XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) std::abort();
    return dir;
  }();
  return folder;
}

bool Names(const absl::Status& s, const std::string& what) {
  return s.ok() || s.message().find(what) != absl::string_view::npos;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& dir = Folder();
  {
    std::ofstream out(dir + "/index.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) std::abort();
  }
  const auto run = kiln::nn::TrainingCheckpointRun(dir);
  if (!Names(run.status(), dir)) std::abort();
  const auto index = kiln::ReadShardedCheckpointIndex(dir);
  if (!Names(index.status(), dir)) std::abort();
  if (!index.ok()) return 0;
  if (!run.ok() || *run != index->plan.metadata.at(kiln::nn::kRunKey)) std::abort();
  const kiln::ParameterLayout layout = {{"0.weight", kiln::Shape{3, 5}, kiln::DType::kF32},
                                        {"0.bias", kiln::Shape{3}, kiln::DType::kF32}};
  const absl::Status fits = kiln::CheckShardedFits(*index, dir, layout, "adamw", {"exp_avg", "exp_avg_sq"});
  if (!Names(fits, dir)) std::abort();
  return 0;
}
