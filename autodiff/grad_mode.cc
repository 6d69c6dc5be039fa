#include "autodiff/grad_mode.h"

#include <atomic>
#include <cstdint>

#include "autodiff/node.h"

namespace kiln {
namespace {
thread_local bool grad_enabled = true;
}

bool GradEnabled() { return grad_enabled; }

NoGradScope::NoGradScope() : previous_(grad_enabled) { grad_enabled = false; }
NoGradScope::~NoGradScope() { grad_enabled = previous_; }
EnableGradScope::EnableGradScope() : previous_(grad_enabled) { grad_enabled = true; }
EnableGradScope::~EnableGradScope() { grad_enabled = previous_; }

namespace autodiff {

std::atomic<int64_t>& LiveNodes() {
  static std::atomic<int64_t> count{0};
  return count;
}

uint64_t NextNodeId() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace autodiff
}  // namespace kiln
