// The threads that run a CPU device's parallel loops. A training step is hundreds of short ops
// a few microseconds apart; waking a sleeping thread (a futex and the scheduler, more on a VM)
// costs about as much as one of them. So a worker spins for a short while after each job before
// it sleeps, and so does the caller waiting for the workers, unless the device has more threads
// than the machine has cores (spinning would then take a core from a thread with work).
#ifndef KILN_BACKENDS_CPU_WORKER_POOL_H_
#define KILN_BACKENDS_CPU_WORKER_POOL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/function_ref.h"

namespace kiln::cpu {

class WorkerPool {
 public:
  // `workers` threads beside the caller; `spin` lets idle threads spin before sleeping.
  WorkerPool(int workers, bool spin);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int workers() const { return static_cast<int>(slots_.size()); }

  // Runs chunk(0) .. chunk(chunks - 1), chunk 0 on the calling thread and chunk c on worker
  // c - 1; returns when all have finished. chunks <= workers() + 1. When another thread is
  // already running a job on this pool (two ops on one device at once, or a chunk that starts
  // a parallel loop itself), the caller runs every chunk itself: never a deadlock, never a wait.
  void Run(int64_t chunks, absl::FunctionRef<void(int64_t)> chunk);

 private:
  // One worker's mailbox, on its own cache line: the caller posts job numbers, the worker
  // answers with the number it finished.
  struct alignas(64) Slot {
    std::atomic<uint32_t> posted{0};
    std::atomic<uint32_t> finished{0};
    const absl::FunctionRef<void(int64_t)>* chunk = nullptr;
    int64_t index = 0;
  };

  void WorkerLoop(Slot& slot);

  const bool spin_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> threads_;
  std::atomic<bool> busy_{false};
  static constexpr uint32_t kStop = 0xffffffffu;  // posted to end a worker
};

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_WORKER_POOL_H_
