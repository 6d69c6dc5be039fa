#include "backends/cpu/profile_counters.h"

namespace kiln::cpu {
namespace profile_internal {

std::atomic<bool> counting{false};

namespace {
struct Totals {
  std::atomic<int64_t> ns{0}, count{0};
};
Totals totals[2];  // by ProfileCounter
}  // namespace

void Add(ProfileCounter counter, int64_t ns) {
  Totals& t = totals[static_cast<int>(counter)];
  t.ns.fetch_add(ns, std::memory_order_relaxed);
  t.count.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace profile_internal

void SetProfileCounting(bool on) { profile_internal::counting.store(on, std::memory_order_relaxed); }

ProfileCounts ReadProfileCounts() {
  using profile_internal::totals;
  auto read = [](const std::atomic<int64_t>& v) { return v.load(std::memory_order_relaxed); };
  const auto& alloc = totals[static_cast<int>(ProfileCounter::kAllocation)];
  const auto& sync = totals[static_cast<int>(ProfileCounter::kSynchronisation)];
  return {.allocation_ns = read(alloc.ns),
          .allocations = read(alloc.count),
          .synchronisation_ns = read(sync.ns),
          .synchronisations = read(sync.count)};
}

}  // namespace kiln::cpu
