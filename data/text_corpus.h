// A byte-level text corpus: the plain files directly in a folder, sorted by name and
// concatenated; every byte is a token (a vocabulary of 256). Debian's `fortunes` package
// installs one (about 2.5 MB of English in 43 files) beside its .dat indexes and .u8 links,
// which are left out, as are links and subfolders.
#ifndef KILN_DATA_TEXT_CORPUS_H_
#define KILN_DATA_TEXT_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::data {

inline constexpr char kFortunesDir[] = "/usr/share/games/fortunes";

struct TextCorpus {
  std::vector<uint8_t> bytes;
  std::vector<std::string> files;  // in the order they were joined
};

// NotFound for a missing folder; FailedPrecondition for a folder with no plain file or more
// than max_bytes in all (checked from the files' sizes before anything is read).
absl::StatusOr<TextCorpus> LoadTextCorpus(const std::string& dir, int64_t max_bytes = int64_t{1} << 30);

}  // namespace kiln::data

#endif  // KILN_DATA_TEXT_CORPUS_H_
