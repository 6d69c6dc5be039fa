// A short spin before a thread sleeps on a condition variable (Meeting). The members of an
// in-process group meet twice per collective, many times a step, usually microseconds apart;
// waking a thread that slept (a futex, the scheduler, an idle virtual CPU's exit to the
// hypervisor) costs about as much as the work between the meetings. Spinning only pays while
// every member has a core of its own (SpinPays), as the CPU worker pools decide. (Members
// waiting for their next job do not spin: their device's worker threads and the caller need
// those cores then.)
#ifndef KILN_DISTRIBUTED_SPIN_WAIT_H_
#define KILN_DISTRIBUTED_SPIN_WAIT_H_

#include <chrono>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace kiln::distributed {

// Long enough to bridge the skew between members doing the same work, short enough that a
// member that is really waiting (for a slow peer, for the next step) gives its core back soon.
inline constexpr std::chrono::microseconds kMeetingSpin{50};

// Whether `threads` spinning threads fit the machine's cores.
inline bool SpinPays(int threads) {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 && threads <= static_cast<int>(cores);
}

// Spins until done() (true) or `limit` passes (false); done() must be cheap and lock-free.
template <class Done>
bool SpinUntil(Done done, std::chrono::microseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (int i = 1;; ++i) {
    if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
    _mm_pause();
#endif
    if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) return done();
  }
}

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_SPIN_WAIT_H_
