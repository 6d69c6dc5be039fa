#include "tests/data/hostile_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <new>
#include <thread>

namespace kiln::testing {
namespace {

std::atomic<bool> armed{false};
std::atomic<size_t> budget{0};
std::atomic<size_t> spent_bytes{0};

}  // namespace

AllocationBudget::AllocationBudget(size_t bytes) {
  budget = bytes;
  spent_bytes = 0;
  armed = true;
}

AllocationBudget::~AllocationBudget() { armed = false; }

size_t AllocationBudget::spent() const { return spent_bytes; }

bool ReturnsWithoutAWriter(const std::string& path, const std::function<void(const std::string&)>& read,
                           double seconds) {
  unlink(path.c_str());
  if (mkfifo(path.c_str(), 0600) != 0) std::abort();
  std::future<void> done = std::async(std::launch::async, read, path);
  const bool returned = done.wait_for(std::chrono::duration<double>(seconds)) == std::future_status::ready;
  if (!returned) {
    // The reader is blocked in open (or read): a writer that comes and goes releases it.
    const int fd = open(path.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) close(fd);
  }
  done.wait();
  unlink(path.c_str());
  return returned;
}

}  // namespace kiln::testing

// The global allocation functions, replaced for the whole test binary so that the budget sees
// every container's allocation. The rest (nothrow, aligned) reach malloc and free as well.
// GCC sees free() of what operator new returned; here that is the pairing, by construction.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void* operator new(size_t n) {
  using kiln::testing::armed;
  // Only the allocation that would overspend fails (and is not counted): the unwinding after
  // it may allocate again (nlohmann's destructor does), and must not meet a second throw.
  if (armed && kiln::testing::spent_bytes.fetch_add(n) + n > kiln::testing::budget) {
    kiln::testing::spent_bytes.fetch_sub(n);
    throw std::bad_alloc();
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) { return operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
