#include "backends/cpu/worker_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::cpu {
namespace {

// Long enough to bridge the gap between the ops of a step (a few to tens of microseconds),
// short enough that an idle device gives its cores back almost at once.
constexpr auto kSpinTime = std::chrono::microseconds(100);

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Returns once `value` is no longer `old`: spinning first if `spin`, then sleeping on it.
uint32_t AwaitChange(const std::atomic<uint32_t>& value, uint32_t old, bool spin) {
  if (spin) {
    const auto deadline = std::chrono::steady_clock::now() + kSpinTime;
    for (int i = 1;; ++i) {
      const uint32_t now = value.load(std::memory_order_acquire);
      if (now != old) return now;
      CpuRelax();
      if (i % 256 == 0 && std::chrono::steady_clock::now() > deadline) break;
    }
  }
  uint32_t now;
  while ((now = value.load(std::memory_order_acquire)) == old) value.wait(old, std::memory_order_acquire);
  return now;
}

// Returns once `value` is `target` (it only moves towards it).
void AwaitValue(const std::atomic<uint32_t>& value, uint32_t target, bool spin) {
  uint32_t now = value.load(std::memory_order_acquire);
  while (now != target) now = AwaitChange(value, now, spin);
}

}  // namespace

WorkerPool::WorkerPool(int workers, bool spin) : spin_(spin) {
  for (int w = 0; w < workers; ++w) slots_.push_back(std::make_unique<Slot>());
  threads_.reserve(workers);
  try {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this, w] { WorkerLoop(*slots_[w]); });
  } catch (...) {  // std::system_error: stop the threads already started
    for (size_t w = 0; w < threads_.size(); ++w) {
      slots_[w]->posted.store(kStop, std::memory_order_release);
      slots_[w]->posted.notify_one();
      threads_[w].join();
    }
    throw;
  }
}

WorkerPool::~WorkerPool() {
  for (size_t w = 0; w < threads_.size(); ++w) {
    slots_[w]->posted.store(kStop, std::memory_order_release);
    slots_[w]->posted.notify_one();
  }
  for (std::thread& t : threads_) t.join();
}

void WorkerPool::WorkerLoop(Slot& slot) {
  uint32_t seen = 0;
  while (true) {
    seen = AwaitChange(slot.posted, seen, spin_);
    if (seen == kStop) return;
    (*slot.chunk)(slot.index);
    slot.finished.store(seen, std::memory_order_release);
    slot.finished.notify_one();
  }
}

void WorkerPool::Run(int64_t chunks, absl::FunctionRef<void(int64_t)> chunk) {
  if (chunks <= 1 || busy_.exchange(true, std::memory_order_acquire)) {
    for (int64_t c = 0; c < chunks; ++c) chunk(c);
    return;
  }
  const int64_t posted = std::min<int64_t>(chunks - 1, workers());
  for (int64_t w = 0; w < posted; ++w) {
    Slot& slot = *slots_[w];
    uint32_t job = slot.posted.load(std::memory_order_relaxed) + 1;
    if (job == kStop) job = 0;  // job numbers wrap, skipping the stop value
    slot.chunk = &chunk;
    slot.index = w + 1;
    slot.posted.store(job, std::memory_order_release);
    slot.posted.notify_one();  // a system call only when the worker sleeps
  }
  chunk(0);
  for (int64_t c = posted + 1; c < chunks; ++c) chunk(c);  // more chunks than workers
  // Only this thread posts, so a slot's `posted` is the job to await.
  for (int64_t w = 0; w < posted; ++w) {
    AwaitValue(slots_[w]->finished, slots_[w]->posted.load(std::memory_order_relaxed), spin_);
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace kiln::cpu
