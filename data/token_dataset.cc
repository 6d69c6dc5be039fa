#include "data/token_dataset.h"

#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln::data {
namespace {

uint32_t TokenAt(const uint8_t* tokens, int width, int64_t i) {
  if (width == 1) return tokens[i];
  return uint32_t{tokens[2 * i]} | uint32_t{tokens[2 * i + 1]} << 8;
}

// The largest id of a file's tokens, in blocks so that the loop vectorises.
uint32_t MaxToken(const uint8_t* tokens, int width, int64_t count) {
  uint32_t top = 0;
  if (width == 1) {
    for (int64_t i = 0; i < count; ++i) top = std::max<uint32_t>(top, tokens[i]);
  } else {
    for (int64_t i = 0; i < count; ++i) top = std::max(top, uint32_t{tokens[2 * i]} | uint32_t{tokens[2 * i + 1]} << 8);
  }
  return top;
}

// The largest id of a file, or an error naming the first one at or above `vocab` (0: no limit).
absl::StatusOr<uint32_t> CheckIds(const MappedFile& file, const TokenLayout& layout, int64_t vocab) {
  const uint8_t* tokens = file.bytes().data() + layout.offset;
  if (layout.width == 1 && (vocab == 0 || vocab >= 256)) return 255;  // bytes: the vocabulary is 256
  file.AdviseSequential();
  const uint32_t top = MaxToken(tokens, layout.width, layout.count);
  if (vocab > 0 && top >= vocab) {
    int64_t i = 0;
    while (TokenAt(tokens, layout.width, i) < vocab) ++i;
    return absl::InvalidArgumentError(absl::StrCat(file.path(), ": token id ", TokenAt(tokens, layout.width, i),
                                                   " at byte offset ", layout.offset + i * layout.width, " (token ", i,
                                                   " of the file) is not below the vocabulary size ", vocab));
  }
  return top;
}

// The files a folder contributes, sorted by name, as the header of token_dataset.h says.
absl::StatusOr<std::vector<std::string>> FolderFiles(const std::string& dir, TokenFormat format) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, absl::StrCat("cannot open the data folder ", dir));
  std::vector<std::string> bins, texts;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    struct stat st {};
    if (name.empty() || name[0] == '.' || lstat(absl::StrCat(dir, "/", name).c_str(), &st) != 0 ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    if (absl::EndsWith(name, ".bin")) bins.push_back(name);
    if (!absl::EndsWith(name, ".dat")) texts.push_back(name);
  }
  closedir(d);
  const bool tokens =
      format == TokenFormat::kRaw || format == TokenFormat::kShard || (format == TokenFormat::kAuto && !bins.empty());
  std::vector<std::string> names = tokens ? bins : texts;
  if (names.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " holds no ", tokens ? "token file (*.bin)" : "plain file", " to read"));
  }
  std::sort(names.begin(), names.end());
  for (std::string& name : names) name = absl::StrCat(dir, "/", name);
  return names;
}

}  // namespace

absl::StatusOr<TokenDataset> TokenDataset::Open(const std::string& path, const TokenDatasetOptions& options) {
  if (options.vocab < 0 || options.vocab > (int64_t{1} << 32)) {
    return absl::InvalidArgumentError(absl::StrCat("a vocabulary of ", options.vocab, " tokens is out of range"));
  }
  struct stat st {};
  const bool folder = stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  std::vector<std::string> paths = {path};
  if (folder) {
    auto listed = FolderFiles(path, options.format);
    if (!listed.ok()) return listed.status();
    paths = *std::move(listed);
  }
  auto parts = std::make_shared<std::vector<Part>>();
  int64_t total = 0;
  uint32_t top = 0;
  for (const std::string& p : paths) {
    auto file = MappedFile::Open(p);
    if (!file.ok()) return file.status();
    const absl::Span<const uint8_t> bytes = (*file)->bytes();
    const int64_t size = static_cast<int64_t>(bytes.size());
    if (folder && size == 0 && !absl::EndsWith(p, ".bin")) continue;  // an empty text file adds nothing
    auto layout = ParseTokenLayout(p, bytes, size, options.format);
    if (!layout.ok()) return layout.status();
    auto file_top = CheckIds(**file, *layout, options.vocab);
    if (!file_top.ok()) return file_top.status();
    top = std::max(top, *file_top);
    parts->push_back({.file = *std::move(file), .layout = *layout, .first = total});
    total += layout->count;
  }
  if (total == 0) return absl::FailedPreconditionError(absl::StrCat(path, " holds no tokens"));
  TokenDataset dataset;
  dataset.end_ = total;
  dataset.vocab_ = options.vocab > 0 ? options.vocab : int64_t{top} + 1;
  dataset.parts_ = std::move(parts);
  return dataset;
}

const char* TokenDataset::format() const { return TokenFormatName(parts_->front().layout.format); }

std::vector<std::string> TokenDataset::files() const {
  std::vector<std::string> out;
  for (const Part& part : *parts_) {
    if (part.first < end_ && part.first + part.layout.count > begin_) out.push_back(part.file->path());
  }
  return out;
}

absl::Status TokenDataset::Read(int64_t begin, absl::Span<int64_t> out) const {
  const int64_t n = static_cast<int64_t>(out.size());
  if (begin < 0 || n > size() || begin > size() - n) {
    return absl::OutOfRangeError(
        absl::StrCat("tokens [", begin, ", ", begin + n, ") lie beyond the dataset's ", size()));
  }
  int64_t at = begin_ + begin;  // a stream index
  // The last part starting at or before `at`, then onwards while the range goes on.
  auto part =
      std::upper_bound(parts_->begin(), parts_->end(), at, [](int64_t i, const Part& p) { return i < p.first; }) - 1;
  for (int64_t done = 0; done < n; ++part) {
    const int64_t from = at - part->first;
    const int64_t take = std::min(n - done, part->layout.count - from);
    const uint8_t* tokens = part->file->bytes().data() + part->layout.offset;
    for (int64_t i = 0; i < take; ++i) out[done + i] = TokenAt(tokens, part->layout.width, from + i);
    done += take;
    at += take;
  }
  return absl::OkStatus();
}

TokenDataset TokenDataset::Slice(int64_t begin, int64_t end) const {
  TokenDataset out = *this;
  begin = std::clamp<int64_t>(begin, 0, size());
  end = std::clamp<int64_t>(end, begin, size());
  out.begin_ = begin_ + begin;
  out.end_ = begin_ + end;
  return out;
}

void TokenDataset::AdviseRandom() const {
  for (const Part& part : *parts_) part.file->AdviseRandom();
}

}  // namespace kiln::data
