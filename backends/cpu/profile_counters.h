// Time the CPU backend spends allocating buffers and waiting on its worker threads, for a
// training step's breakdown (bench/gpt_step_bench.cc). Counting is off unless a profiler turns
// it on; while off, a counted scope costs one relaxed atomic load.
#ifndef KILN_BACKENDS_CPU_PROFILE_COUNTERS_H_
#define KILN_BACKENDS_CPU_PROFILE_COUNTERS_H_

#include <atomic>
#include <chrono>
#include <cstdint>

namespace kiln::cpu {

enum class ProfileCounter {
  kAllocation,       // AllocateBuffer and FreeBuffer
  kSynchronisation,  // WorkerPool::Run posting jobs to its workers and waiting for them
};

// Totals since the program started, over every thread (a step's share: the difference of two
// reads). Only the thread that runs a device's ops allocates and waits, so in a step these are
// time on that thread's clock.
struct ProfileCounts {
  int64_t allocation_ns = 0, allocations = 0;
  int64_t synchronisation_ns = 0, synchronisations = 0;
};

void SetProfileCounting(bool on);
ProfileCounts ReadProfileCounts();

namespace profile_internal {
extern std::atomic<bool> counting;
void Add(ProfileCounter counter, int64_t ns);
inline int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace profile_internal

// Adds the time from its construction to its destruction to `counter`, when counting is on.
class CountedScope {
 public:
  explicit CountedScope(ProfileCounter counter)
      : counter_(counter),
        start_ns_(profile_internal::counting.load(std::memory_order_relaxed) ? profile_internal::NowNs() : -1) {}
  ~CountedScope() {
    if (start_ns_ >= 0) profile_internal::Add(counter_, profile_internal::NowNs() - start_ns_);
  }
  CountedScope(const CountedScope&) = delete;
  CountedScope& operator=(const CountedScope&) = delete;

 private:
  ProfileCounter counter_;
  int64_t start_ns_;  // -1: not counting
};

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_PROFILE_COUNTERS_H_
