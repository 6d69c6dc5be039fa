#include "examples/gpt_token_data.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace kiln {
namespace {

absl::Status Flagged(const char* flag, const std::string& path, const absl::Status& status) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", path, ": ", status.message()));
}

absl::Status CheckSplit(const char* flag, const std::string& path, const data::TokenDataset& split, int64_t context) {
  if (split.size() > context) return absl::OkStatus();
  return Flagged(flag, path,
                 absl::InvalidArgumentError(absl::StrCat(split.size(), " tokens are too few for --context=", context,
                                                         " (", context + 1, " tokens a window)")));
}

}  // namespace

absl::StatusOr<GptTokenData> OpenGptTokenData(const GptTokenDataOptions& o) {
  auto train = data::TokenDataset::Open(o.train, {.format = o.format, .vocab = o.vocab});
  if (!train.ok()) return Flagged("train_data", o.train, train.status());
  data::TokenDataset train_split = *train, val_split = *train;
  int64_t vocab = train->vocab();
  if (o.val.empty()) {  // as the fortunes corpus splits: the first 90% trains
    const int64_t split = train->size() * 9 / 10;
    train_split = train->Slice(0, split);
    val_split = train->Slice(split, train->size());
  } else {
    auto val = data::TokenDataset::Open(o.val, {.format = o.format, .vocab = o.vocab});
    if (!val.ok()) return Flagged("val_data", o.val, val.status());
    val_split = *std::move(val);
    vocab = std::max(vocab, val_split.vocab());
  }
  const char* val_flag = o.val.empty() ? "train_data" : "val_data";
  if (absl::Status s = CheckSplit("train_data", o.train, train_split, o.context); !s.ok()) return s;
  if (absl::Status s = CheckSplit(val_flag, o.val.empty() ? o.train : o.val, val_split, o.context); !s.ok()) {
    return s;
  }
  auto sampler = data::WindowSampler::Create(train_split.size(), o.context, o.seed);
  if (!sampler.ok()) return Flagged("train_data", o.train, sampler.status());
  GptTokenData out{.train = train_split, .val = val_split, .sampler = *sampler, .vocab = vocab};
  out.train.AdviseRandom();  // sampled windows: read the pages touched, not the file around them
  return out;
}

}  // namespace kiln
