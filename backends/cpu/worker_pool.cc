#include "backends/cpu/worker_pool.h"

#include <algorithm>
#include <chrono>

#include "backends/cpu/profile_counters.h"

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

// Returns once `value` is `target` (it changes only to become it).
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
    Stop();
    throw;
  }
}

WorkerPool::~WorkerPool() { Stop(); }

void WorkerPool::Stop() {
  stop_.store(true, std::memory_order_release);
  for (size_t w = 0; w < threads_.size(); ++w) {
    slots_[w]->ticket.fetch_add(2, std::memory_order_release);  // wakes the worker, which sees stop_
    slots_[w]->ticket.notify_one();
  }
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void WorkerPool::WorkerLoop(Slot& slot) {
  uint32_t ticket = slot.ticket.load(std::memory_order_acquire);
  while (!stop_.load(std::memory_order_acquire)) {
    if (ticket % 2 == 1) {
      ticket = AwaitChange(slot.ticket, ticket, spin_);
    } else if (slot.ticket.compare_exchange_strong(ticket, ticket + 1, std::memory_order_acq_rel)) {
      (*slot.chunk)(slot.index);
      slot.finished.store(ticket / 2, std::memory_order_release);
      slot.finished.notify_one();
      ++ticket;
    }  // else `ticket` now holds the new value (the caller took the job back, or posted another)
  }
}

void WorkerPool::Run(int64_t chunks, absl::FunctionRef<void(int64_t)> chunk) {
  if (chunks <= 1 || busy_.exchange(true, std::memory_order_acquire)) {
    for (int64_t c = 0; c < chunks; ++c) chunk(c);
    return;
  }
  const int64_t offered = std::min<int64_t>(chunks - 1, workers());
  for (int64_t w = 0; w < offered; ++w) {
    CountedScope counted(ProfileCounter::kSynchronisation);  // the wake-up
    Slot& slot = *slots_[w];
    slot.chunk = &chunk;
    slot.index = w + 1;
    // The previous job is taken (and over), so the ticket is odd: the next job's is one more.
    slot.ticket.fetch_add(1, std::memory_order_release);
    slot.ticket.notify_one();  // a system call only when the worker sleeps
  }
  chunk(0);
  for (int64_t c = offered + 1; c < chunks; ++c) chunk(c);
  for (int64_t w = 0; w < offered; ++w) {
    Slot& slot = *slots_[w];
    uint32_t ticket = slot.ticket.load(std::memory_order_relaxed);
    if (ticket % 2 == 0 && slot.ticket.compare_exchange_strong(ticket, ticket + 1, std::memory_order_acq_rel)) {
      chunk(w + 1);  // the worker had not started it
    } else {
      CountedScope counted(ProfileCounter::kSynchronisation);
      AwaitValue(slot.finished, ticket / 2, spin_);
    }
  }
  busy_.store(false, std::memory_order_release);
}

}  // namespace kiln::cpu
