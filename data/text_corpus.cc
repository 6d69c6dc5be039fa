#include "data/text_corpus.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "nn/file_io.h"

namespace kiln::data {

absl::StatusOr<TextCorpus> LoadTextCorpus(const std::string& dir, int64_t max_bytes) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat("cannot open the corpus folder ", dir));
  }
  std::vector<std::string> names;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name[0] == '.' || absl::EndsWith(name, ".dat") || absl::EndsWith(name, ".u8")) continue;
    struct stat st {};
    if (lstat(absl::StrCat(dir, "/", name).c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  if (names.empty()) return absl::FailedPreconditionError(absl::StrCat(dir, " holds no plain text file"));
  std::vector<nn::InputFile> files;
  uint64_t total = 0;
  for (const std::string& name : names) {
    absl::StatusOr<nn::InputFile> f = nn::InputFile::Open(absl::StrCat(dir, "/", name));
    if (!f.ok()) return f.status();
    total += f->size();
    if (total > static_cast<uint64_t>(max_bytes)) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, ": the corpus is larger than ", max_bytes, " bytes (at ", name, ")"));
    }
    files.push_back(*std::move(f));
  }
  TextCorpus corpus;
  corpus.bytes.resize(total);
  uint64_t at = 0;
  for (const nn::InputFile& f : files) {
    if (absl::Status s = f.ReadAt(0, corpus.bytes.data() + at, f.size()); !s.ok()) return s;
    at += f.size();
    corpus.files.push_back(f.path());
  }
  return corpus;
}

}  // namespace kiln::data
