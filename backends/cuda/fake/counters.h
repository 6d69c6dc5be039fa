// The fake runtime's counters, shared by its CUDA runtime and cuBLAS halves (internal).
#ifndef KILN_BACKENDS_CUDA_FAKE_COUNTERS_H_
#define KILN_BACKENDS_CUDA_FAKE_COUNTERS_H_

#include <atomic>
#include <cstdint>

namespace kiln::cuda::fake {

struct Counters {
  std::atomic<int64_t> launches{0};
  std::atomic<int64_t> blas_calls{0};
  std::atomic<int64_t> syncs{0};
  std::atomic<int64_t> mallocs{0};
  std::atomic<int64_t> copies{0};
  std::atomic<int64_t> device_switches{0};
  std::atomic<int64_t> runtime_calls{0};
};

// Relaxed increments: the counts are read after the ops, on the thread that made them or
// after joining the threads that did.
inline void Bump(std::atomic<int64_t>& counter) { counter.fetch_add(1, std::memory_order_relaxed); }

Counters& GlobalCounters();

}  // namespace kiln::cuda::fake

#endif  // KILN_BACKENDS_CUDA_FAKE_COUNTERS_H_
