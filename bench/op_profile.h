// Where a training step's time goes: each backend op's time (Profiled<B>, profiled_backend.h)
// by op and by category, the CPU backend's allocation and worker-pool waits, and the step's
// phases. Op times exclude the allocation and waits inside them, so the categories partition
// the step's wall time; what no op, allocation or wait covers is the framework's own work
// (autodiff's graph recording and backward traversal, modules, the data-parallel hand-off).
#ifndef KILN_BENCH_OP_PROFILE_H_
#define KILN_BENCH_OP_PROFILE_H_

#include <array>
#include <cstdint>
#include <string>

#include "backends/cpu/profile_counters.h"
#include "tensor/op_table.h"

namespace kiln::bench {

// One id per row of tensor/op_table.h, plus `contiguous` (a CPU backend's own).
#define KILN_PROFILE_OP_ID(Result, name, params, args) k_##name,
#define KILN_PROFILE_FUSED_OP_ID(Group, Result, name, params, args, composition) k_##name,
enum class OpId { KILN_CORE_OPS(KILN_PROFILE_OP_ID) KILN_FUSED_OPS(KILN_PROFILE_FUSED_OP_ID) k_contiguous, kCount };
#undef KILN_PROFILE_OP_ID
#undef KILN_PROFILE_FUSED_OP_ID
inline constexpr int kOpCount = static_cast<int>(OpId::kCount);
const char* OpName(OpId op);

// The rows of a breakdown. kOptimizer takes every op inside an optimizer's update
// (OptimizerScope), whatever the op.
enum class Category {
  kGemm,             // matmul, linear (its bias added in the product)
  kAttention,        // the fused causal attention, forward and backward (its per-head GEMMs inside)
  kFused,            // softmax, norm, GELU, cross-entropy kernels (forward and backward)
  kElementwise,      // unary, binary, where, reductions, argmax
  kCast,             // dtype conversions (mixed precision's casts, the clip's f64 sums)
  kLayout,           // reshape, permute, slices, cat, gather/scatter, copies, creation
  kOptimizer,        // AdamW / SGD updates
  kAllocation,       // the CPU allocator (cpu/profile_counters.h)
  kSynchronisation,  // worker-pool wake-ups and waits
  kFramework,        // the rest of the wall time: autodiff bookkeeping, modules, hand-offs
  kCount
};
inline constexpr int kCategoryCount = static_cast<int>(Category::kCount);
const char* CategoryName(Category c);
Category CategoryOf(OpId op);

// Phases of a data-parallel step, marked by the caller (MarkPhase).
enum class Phase { kOutside, kForward, kBackward, kOptimizer, kCount };
inline constexpr int kPhaseCount = static_cast<int>(Phase::kCount);
const char* PhaseName(Phase p);

struct Totals {
  int64_t ns = 0, calls = 0;
};

// What a profiled stretch of time held.
struct Profile {
  std::array<Totals, kOpCount> ops{};
  std::array<Totals, kCategoryCount> categories{};  // kFramework: set by Finish
  std::array<int64_t, kPhaseCount> phase_ns{};
  int64_t wall_ns = 0;

  Profile& operator+=(const Profile& other);
  // Sets kFramework to the wall time no other category covers.
  void Finish();
};

// Process-wide recording, one profiled stretch at a time: Start, the work, Stop. Ops may run on
// any thread, but on one at a time (a single-device step); other threads' ops would overlap.
class OpProfile {
 public:
  static void Start();
  static Profile Stop();
  static bool on() { return on_.load(std::memory_order_relaxed); }
  static void AddOp(OpId op, int64_t ns);
  // Ends the current phase here and begins `phase` (no-op when it is already the current one).
  static void MarkPhase(Phase phase);
  static void EnterOptimizer() { ++optimizer_depth_; }
  static void LeaveOptimizer() { --optimizer_depth_; }

 private:
  static std::atomic<bool> on_;
  static thread_local int optimizer_depth_;
};

// Times one op of Profiled<B> into the profile, less the allocation and waits inside it.
class OpTimer {
 public:
  explicit OpTimer(OpId op);
  ~OpTimer();
  OpTimer(const OpTimer&) = delete;
  OpTimer& operator=(const OpTimer&) = delete;

 private:
  OpId op_;
  bool on_;  // profiling, and not inside another profiled op
  cpu::ProfileCounts counts_;
  int64_t start_ns_ = 0;
};

// Every op inside counts as the optimizer's (see ProfiledAdamW, gpt_step_profile.h).
class OptimizerScope {
 public:
  OptimizerScope() { OpProfile::EnterOptimizer(); }
  ~OptimizerScope() { OpProfile::LeaveOptimizer(); }
  OptimizerScope(const OptimizerScope&) = delete;
  OptimizerScope& operator=(const OptimizerScope&) = delete;
};

// The breakdown as text: a table of categories (ms per step, share of the wall time), the
// phases, and the `top_ops` slowest ops. `steps`: how many steps `total` sums.
std::string FormatProfile(const Profile& total, int steps, int top_ops);

}  // namespace kiln::bench

#endif  // KILN_BENCH_OP_PROFILE_H_
