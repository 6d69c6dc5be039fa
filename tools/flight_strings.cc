#include "tools/flight_strings.h"

#include <algorithm>
#include <cstring>

#include "absl/hash/hash.h"
#include "absl/strings/str_cat.h"

namespace kiln::tools {

size_t FlightStrings::Hash::operator()(absl::string_view s) const { return absl::Hash<absl::string_view>{}(s); }

FlightStrings::FlightStrings() : ids_(0, Hash{this}, Eq{this}) {}

absl::StatusOr<uint32_t> FlightStrings::Intern(absl::string_view s) {
  if (s.size() > kMaxText) return absl::InvalidArgumentError(absl::StrCat("a text of more than ", kMaxText, " bytes"));
  if (const auto it = ids_.find(s); it != ids_.end()) return *it;
  const size_t need = 2 + s.size();
  if (!chunks_.empty() && used_ + need > capacity_ && used_ + need <= kChunk) {
    // The last chunk grows, doubling, to kChunk: a small merge stays small.
    const size_t grown = std::min(kChunk, std::max(2 * capacity_, used_ + need));
    auto bigger = std::make_unique_for_overwrite<char[]>(grown);
    std::memcpy(bigger.get(), chunks_.back().get(), used_);
    chunks_.back() = std::move(bigger);
    capacity_ = grown;
  }
  if (chunks_.empty() || used_ + need > capacity_) {
    if (chunks_.size() == (uint64_t{1} << 32) / kChunk) {
      return absl::ResourceExhaustedError("more than 4 GiB of distinct texts");
    }
    capacity_ = std::max<size_t>(4096, need);
    chunks_.push_back(std::make_unique_for_overwrite<char[]>(capacity_));
    used_ = 0;
  }
  char* at = chunks_.back().get() + used_;
  at[0] = static_cast<char>(s.size() & 0xFF);
  at[1] = static_cast<char>(s.size() >> 8);
  std::memcpy(at + 2, s.data(), s.size());
  const auto id = static_cast<uint32_t>((chunks_.size() - 1) * kChunk + used_);
  used_ += need;
  ids_.insert(id);
  return id;
}

absl::string_view FlightStrings::Get(uint32_t id) const {
  const char* at = chunks_[id / kChunk].get() + id % kChunk;
  const size_t size = static_cast<unsigned char>(at[0]) | static_cast<size_t>(static_cast<unsigned char>(at[1])) << 8;
  return absl::string_view(at + 2, size);
}

}  // namespace kiln::tools
