// A stream of token ids too big to read whole: one token file (data/token_file.h: nanoGPT's
// raw .bin, llm.c's shard, or text as bytes) or the files of a folder joined in name order, read
// through memory maps. The vocabulary is checked when the dataset opens (one sequential pass),
// so every id read later is below it.
#ifndef KILN_DATA_TOKEN_DATASET_H_
#define KILN_DATA_TOKEN_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/mapped_file.h"
#include "data/token_file.h"

namespace kiln::data {

struct TokenDatasetOptions {
  TokenFormat format = TokenFormat::kAuto;
  int64_t vocab = 0;  // 0: from the data (256 for text; the largest id + 1 for token files)
};

class TokenDataset {
 public:
  // A file, or a folder: its .bin files if it has any (or `format` asks for token files), else
  // its plain files as text (not hidden files, links, subfolders, or fortune's .dat indexes).
  // Errors name the file: NotFound or FailedPrecondition for what cannot be opened, an empty
  // folder or no tokens at all; InvalidArgument for a malformed file (ParseTokenLayout) and for
  // an id at or above a given vocabulary, with its byte offset in the file.
  static absl::StatusOr<TokenDataset> Open(const std::string& path, const TokenDatasetOptions& options = {});

  int64_t size() const { return end_ - begin_; }  // tokens
  int64_t vocab() const { return vocab_; }
  const char* format() const;  // "bin", "shard" or "text"
  std::vector<std::string> files() const;

  // Tokens [begin, begin + out.size()) of this dataset (across files where the range spans
  // them); OutOfRange past its end.
  absl::Status Read(int64_t begin, absl::Span<int64_t> out) const;
  // Tokens [begin, end) of this dataset as a dataset (sharing the maps); clamped to it.
  TokenDataset Slice(int64_t begin, int64_t end) const;
  // Asks the kernel to read no more than the pages touched (random windows).
  void AdviseRandom() const;

 private:
  struct Part {
    std::shared_ptr<const MappedFile> file;
    TokenLayout layout;
    int64_t first = 0;  // the stream index of its first token
  };
  std::shared_ptr<const std::vector<Part>> parts_;
  int64_t begin_ = 0, end_ = 0, vocab_ = 0;
};

}  // namespace kiln::data

#endif  // KILN_DATA_TOKEN_DATASET_H_
