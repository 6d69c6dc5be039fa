// The bytes a device's tensors hold: what each backend reports through its static
// memory_usage(device) and reset_peak_memory(device) (backends/registry.h). A backend counts
// every tensor buffer it allocates and frees, per device, in a MemoryCounter.
#ifndef KILN_TENSOR_MEMORY_USAGE_H_
#define KILN_TENSOR_MEMORY_USAGE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace kiln {

struct MemoryUsage {
  int64_t current_bytes = 0;  // held by live tensor buffers now
  int64_t peak_bytes = 0;     // the most current_bytes has been since start (or the last reset)
  friend bool operator==(const MemoryUsage&, const MemoryUsage&) = default;
};

// Current and peak bytes of one device, updated from any thread without a lock. Counts what
// tensors asked for (shape x element size), not what an allocator rounds up to or caches.
class MemoryCounter {
 public:
  void Allocated(int64_t bytes) { RaisePeak(current_.fetch_add(bytes) + bytes); }
  void Freed(int64_t bytes) { current_.fetch_sub(bytes); }

  // A snapshot; peak is at least current even while an allocation is raising it.
  MemoryUsage usage() const {
    const int64_t current = current_.load();
    return {current, std::max(current, peak_.load())};
  }

  // The peak restarts from the bytes held now. The second RaisePeak covers an allocation that
  // raised the peak between the load and the store, so a reset never leaves peak < current.
  void ResetPeak() {
    peak_.store(current_.load());
    RaisePeak(current_.load());
  }

 private:
  void RaisePeak(int64_t bytes) {
    int64_t peak = peak_.load();
    while (bytes > peak && !peak_.compare_exchange_weak(peak, bytes)) {
    }
  }

  std::atomic<int64_t> current_{0};
  std::atomic<int64_t> peak_{0};
};

}  // namespace kiln

#endif  // KILN_TENSOR_MEMORY_USAGE_H_
