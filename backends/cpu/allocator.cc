#include "backends/cpu/allocator.h"

#include <cstdlib>
#include <mutex>
#include <new>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "backends/cpu/profile_counters.h"

namespace kiln::cpu {
namespace {

constexpr std::align_val_t kAlign{kBufferAlignment};
// Below this, glibc's malloc reuses memory well by itself.
constexpr int64_t kCachedMinimum = int64_t{1} << 10;

int64_t CacheLimit() {
  const char* env = std::getenv("KILN_CPU_CACHE_BYTES");
  int64_t limit = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &limit) && limit >= 0) return limit;
  return int64_t{4} << 30;
}

// Sizes are rounded up to an eighth of their power of two (at most 12.5% waste), so that
// near-equal sizes share a bucket.
int64_t Rounded(int64_t nbytes) {
  if (nbytes < kCachedMinimum) return nbytes;
  int64_t power = 1;
  while (power < nbytes) power <<= 1;
  const int64_t step = power / 8;
  return (nbytes + step - 1) / step * step;
}

class Cache {
 public:
  std::byte* Take(int64_t size) {
    std::lock_guard lock(mu_);
    auto it = free_.find(size);
    if (it == free_.end() || it->second.empty()) {
      ++misses_;
      return nullptr;
    }
    std::byte* p = it->second.back();
    it->second.pop_back();
    cached_ -= size;
    ++hits_;
    return p;
  }

  bool Give(std::byte* p, int64_t size) {
    std::lock_guard lock(mu_);
    if (cached_ + size > limit_) return false;
    free_[size].push_back(p);
    cached_ += size;
    return true;
  }

  std::vector<std::pair<std::byte*, int64_t>> TakeAll() {
    std::lock_guard lock(mu_);
    std::vector<std::pair<std::byte*, int64_t>> all;
    for (auto& [size, list] : free_) {
      for (std::byte* p : list) all.emplace_back(p, size);
    }
    free_.clear();
    cached_ = 0;
    return all;
  }

  CacheStats Stats() {
    std::lock_guard lock(mu_);
    return {cached_, hits_, misses_};
  }

 private:
  std::mutex mu_;  // not absl::Mutex: see cpu_device.cc
  const int64_t limit_ = CacheLimit();
  absl::flat_hash_map<int64_t, std::vector<std::byte*>> free_;
  int64_t cached_ = 0, hits_ = 0, misses_ = 0;
};

Cache& GetCache() {
  static Cache* cache = new Cache();  // never destroyed: buffers may be freed during exit
  return *cache;
}

}  // namespace

std::byte* AllocateBuffer(int64_t nbytes) {
  CountedScope counted(ProfileCounter::kAllocation);
  const int64_t size = Rounded(std::max<int64_t>(nbytes, 1));
  if (size >= kCachedMinimum) {
    if (std::byte* p = GetCache().Take(size)) return p;
  }
  return static_cast<std::byte*>(::operator new(size, kAlign));
}

void FreeBuffer(std::byte* data, int64_t nbytes) {
  CountedScope counted(ProfileCounter::kAllocation);
  const int64_t size = Rounded(std::max<int64_t>(nbytes, 1));
  if (size >= kCachedMinimum && GetCache().Give(data, size)) return;
  ::operator delete(data, kAlign);
}

CacheStats GetCacheStats() { return GetCache().Stats(); }

void ReleaseCachedBuffers() {
  for (auto [p, size] : GetCache().TakeAll()) ::operator delete(p, kAlign);
}

}  // namespace kiln::cpu
