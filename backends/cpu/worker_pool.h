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

  // Runs chunk(0) .. chunk(chunks - 1) and returns when all have finished: chunk 0 on the
  // calling thread, chunk c offered to worker c - 1, which the caller takes back and runs itself
  // if that worker has not started it (a worker the OS has not scheduled never holds the caller
  // up), and any chunks beyond the workers on the caller. When another thread is running a job
  // on this pool already (two ops on one device at once, or a chunk that starts a parallel loop
  // itself), the caller runs every chunk itself: never a deadlock, never a wait.
  void Run(int64_t chunks, absl::FunctionRef<void(int64_t)> chunk);

 private:
  // One worker's mailbox, on its own cache line. `ticket` is the job number times two, plus one
  // once the job is taken (by the worker or back by the caller); `finished` is the number of the
  // last job the worker ran. The caller rewrites `chunk` and `index` only after the previous job
  // is over, so whoever takes a ticket reads the fields posted with it.
  struct alignas(64) Slot {
    std::atomic<uint32_t> ticket{1};  // job 0, taken: nothing to do
    std::atomic<uint32_t> finished{0};
    const absl::FunctionRef<void(int64_t)>* chunk = nullptr;
    int64_t index = 0;
  };

  void WorkerLoop(Slot& slot);
  void Stop();  // ends and joins the workers

  const bool spin_;
  std::vector<std::unique_ptr<Slot>> slots_;
  std::vector<std::thread> threads_;
  std::atomic<bool> busy_{false};
  std::atomic<bool> stop_{false};
};

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_WORKER_POOL_H_
