#include "distributed/process/settings_agreement.h"

#include <cstring>
#include <map>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "distributed/process/fnv1a.h"

namespace kiln::distributed {
namespace {

// Each rank's settings travel as one block of this size: a line per setting, "name=value"
// with the value shown (escaped, cut) and, when cut, a hash of the whole value after it so
// that values differing past the cut still differ.
constexpr int64_t kBlockBytes = 4096;
constexpr size_t kShownBytes = 100;

std::string Shown(const std::string& value) {
  if (value.size() <= kShownBytes) return absl::CEscape(value);
  return absl::StrCat(absl::CEscape(value.substr(0, kShownBytes)), "...#", absl::Hex(Fnv1a(value)));
}

std::string Encode(const Settings& settings) {
  std::string text;
  for (const auto& [name, value] : settings) absl::StrAppend(&text, absl::CEscape(name), "=", Shown(value), "\n");
  // Too many settings for a block: what fits is shown, and a hash of all of it decides.
  const std::string hash = absl::StrCat("#", absl::Hex(Fnv1a(text)), "\n");
  if (static_cast<int64_t>(text.size() + hash.size()) > kBlockBytes) text.resize(kBlockBytes - hash.size());
  return hash + text;
}

std::map<std::string, std::string> Decode(absl::string_view block) {
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(block.substr(0, block.find('\0')), '\n')) {
    const size_t eq = line.find('=');
    if (eq != absl::string_view::npos && !line.empty() && line[0] != '#') {
      out.emplace(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
    }
  }
  return out;
}

}  // namespace

absl::Status AgreeOnSettings(ProcessGroup& group, const Settings& settings) {
  const int world = group.world_size();
  if (world == 1) return absl::OkStatus();
  std::vector<char> blocks(kBlockBytes * world, '\0');
  const std::string mine = Encode(settings);
  std::memcpy(blocks.data() + kBlockBytes * group.rank(), mine.data(), mine.size());
  if (absl::Status s = group.AllGather("agreeing on the run's settings", blocks.data(), kBlockBytes); !s.ok()) {
    return s;
  }
  const absl::string_view all(blocks.data(), blocks.size());
  const absl::string_view first = all.substr(0, kBlockBytes);
  for (int r = 1; r < world; ++r) {
    const absl::string_view theirs = all.substr(kBlockBytes * r, kBlockBytes);
    if (theirs == first) continue;
    const auto a = Decode(first), b = Decode(theirs);
    std::vector<std::string> differences;
    for (const auto& [name, value] : b) {
      const auto it = a.find(name);
      if (it == a.end()) {
        differences.push_back(absl::StrCat("rank ", r, " has ", name, "=", value, " but rank 0 has no ", name));
      } else if (it->second != value) {
        differences.push_back(
            absl::StrCat("rank ", r, " has ", name, "=", value, " but rank 0 has ", name, "=", it->second));
      }
    }
    for (const auto& [name, value] : a) {
      if (!b.contains(name)) {
        differences.push_back(absl::StrCat("rank 0 has ", name, "=", value, " but rank ", r, " has no ", name));
      }
    }
    if (differences.empty()) differences.push_back(absl::StrCat("rank ", r, "'s settings differ from rank 0's"));
    return absl::InvalidArgumentError(
        absl::StrCat("ranks disagree on the run's settings: ", absl::StrJoin(differences, "; "),
                     "; start every rank with the same flags"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::distributed
