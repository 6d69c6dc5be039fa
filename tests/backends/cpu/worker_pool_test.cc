#include "backends/cpu/worker_pool.h"

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace kiln::cpu {
namespace {

// Chunk 0 runs on the caller and waits there for the others, so they can only finish on the
// workers: one each, on three distinct threads.
TEST(WorkerPool, TheWorkersRunTheOtherChunks) {
  for (const bool spin : {true, false}) {
    WorkerPool pool(3, spin);
    std::vector<std::thread::id> ran(4);
    std::atomic<int> others_done{0};
    bool waited_out = false;
    pool.Run(4, [&](int64_t c) {
      ran[c] = std::this_thread::get_id();
      if (c > 0) {
        ++others_done;
        return;
      }
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (others_done.load() < 3 && !(waited_out = std::chrono::steady_clock::now() > deadline)) {
        std::this_thread::yield();
      }
    });
    EXPECT_FALSE(waited_out);
    EXPECT_EQ(others_done.load(), 3);
    EXPECT_EQ(ran[0], std::this_thread::get_id());
    EXPECT_EQ(std::set<std::thread::id>(ran.begin(), ran.end()).size(), 4u);
  }
}

// Many short jobs back to back, sleeping and spinning: every chunk's work is seen by the caller.
TEST(WorkerPool, ManyJobsInARow) {
  for (const bool spin : {true, false}) {
    WorkerPool pool(2, spin);
    std::vector<int64_t> sums(3, 0);
    for (int job = 0; job < 20000; ++job) pool.Run(1 + job % 3, [&](int64_t c) { sums[c] += job; });
    int64_t expected[3] = {0, 0, 0};
    for (int job = 0; job < 20000; ++job) {
      for (int c = 0; c < 1 + job % 3; ++c) expected[c] += job;
    }
    EXPECT_EQ(sums, std::vector<int64_t>(expected, expected + 3));
  }
}

// More chunks than workers: the caller runs the rest.
TEST(WorkerPool, MoreChunksThanWorkers) {
  WorkerPool pool(1, true);
  std::vector<std::atomic<int>> count(5);
  pool.Run(5, [&](int64_t c) { ++count[c]; });
  for (auto& c : count) EXPECT_EQ(c.load(), 1);
}

// A chunk that starts a job itself, and several threads starting jobs at once: the one that
// finds the pool busy runs its chunks itself; nothing deadlocks and every chunk runs once.
TEST(WorkerPool, NestedAndConcurrentJobsRunInline) {
  WorkerPool pool(2, true);
  std::atomic<int> inner{0};
  pool.Run(3, [&](int64_t) { pool.Run(3, [&](int64_t) { ++inner; }); });
  EXPECT_EQ(inner.load(), 9);

  std::atomic<int64_t> total{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&] {
      for (int job = 0; job < 2000; ++job) pool.Run(3, [&](int64_t c) { total += c + 1; });
    });
  }
  for (auto& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 2000 * 6);
}

// A pool destroyed while its workers sleep (and right after a job) ends cleanly.
TEST(WorkerPool, DestroyedIdleOrJustAfterAJob) {
  { WorkerPool idle(3, false); }
  {
    WorkerPool busy(3, true);
    busy.Run(4, [](int64_t) {});
  }
}

// Sleeping workers (no spinning) wake slower than the caller finishes its own short chunk: the
// caller takes back the chunks no worker has started and runs them, and still every chunk runs
// exactly once.
TEST(WorkerPool, TheCallerTakesBackChunksNoWorkerStarted) {
  WorkerPool pool(7, false);
  const std::thread::id caller = std::this_thread::get_id();
  int64_t taken_back = 0;
  for (int job = 0; job < 1000; ++job) {
    std::vector<std::atomic<int>> ran(8);
    std::vector<std::thread::id> on(8);
    pool.Run(8, [&](int64_t c) {
      ++ran[c];
      on[c] = std::this_thread::get_id();
    });
    for (int c = 0; c < 8; ++c) {
      ASSERT_EQ(ran[c].load(), 1) << "job " << job << " chunk " << c;
      taken_back += c > 0 && on[c] == caller;
    }
  }
  EXPECT_GT(taken_back, 0);
}
}  // namespace
}  // namespace kiln::cpu
