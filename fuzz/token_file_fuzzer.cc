// TokenDataset::Open on any bytes as any format (the first byte chooses the format and a
// vocabulary): a status naming the file, never a crash, and what opens reads back whole with every
// id below its vocabulary; the window order over it visits each window once.
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "data/token_dataset.h"
#include "data/window_sampler.h"
#include "fuzz/memory_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using kiln::data::TokenFormat;
  const TokenFormat formats[] = {TokenFormat::kAuto, TokenFormat::kRaw, TokenFormat::kShard, TokenFormat::kBytes};
  const TokenFormat format = formats[data[0] & 3];
  const int64_t vocab = (data[0] >> 2) == 0 ? 0 : int64_t{1} << (data[0] >> 2) % 17;  // 0 (from the data) or 2^k
  const kiln::fuzz::MemoryFile input(data + 1, size - 1);
  const std::string path = input.path();
  const auto dataset = kiln::data::TokenDataset::Open(path, {.format = format, .vocab = vocab});
  if (!dataset.ok()) {
    if (dataset.status().message().find(path) == std::string::npos) std::abort();
    return 0;
  }
  if (dataset->size() < 1 || dataset->vocab() < 1 || (vocab > 0 && dataset->vocab() != vocab)) std::abort();
  std::vector<int64_t> ids(dataset->size());
  if (!dataset->Read(0, absl::MakeSpan(ids)).ok()) std::abort();
  for (int64_t id : ids) {
    if (id < 0 || id >= dataset->vocab()) std::abort();
  }
  const auto sampler = kiln::data::WindowSampler::Create(dataset->size(), 1 + data[0] % 8, size);
  if (sampler.ok() && sampler->windows() <= 4096) {
    std::set<int64_t> starts;
    for (int64_t k = 0; k < sampler->windows(); ++k) starts.insert(sampler->Start(0, k));
    if (static_cast<int64_t>(starts.size()) != sampler->windows()) std::abort();
  }
  return 0;
}
