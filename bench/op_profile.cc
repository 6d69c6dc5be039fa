#include "bench/op_profile.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "absl/strings/str_format.h"

namespace kiln::bench {
namespace {

int64_t Now() { return cpu::profile_internal::NowNs(); }

// The stretch being recorded. Ops add to it from whichever thread runs them, one at a time.
struct Recording {
  std::mutex mu;  // phases and Start/Stop; ops add without it (one thread at a time)
  Profile profile;
  cpu::ProfileCounts counts_at_start;
  int64_t start_ns = 0, phase_start_ns = 0;
  Phase phase = Phase::kOutside;
};
Recording& GetRecording() {
  static Recording* r = new Recording();
  return *r;
}

thread_local int op_depth = 0;

}  // namespace

std::atomic<bool> OpProfile::on_{false};
thread_local int OpProfile::optimizer_depth_ = 0;

const char* OpName(OpId op) {
#define KILN_PROFILE_OP_NAME(Result, name, params, args) #name,
#define KILN_PROFILE_FUSED_OP_NAME(Group, Result, name, params, args, composition) #name,
  static constexpr const char* kNames[] = {KILN_CORE_OPS(KILN_PROFILE_OP_NAME)
                                               KILN_FUSED_OPS(KILN_PROFILE_FUSED_OP_NAME) "contiguous"};
#undef KILN_PROFILE_OP_NAME
#undef KILN_PROFILE_FUSED_OP_NAME
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kOpCount);
  return kNames[static_cast<int>(op)];
}

const char* CategoryName(Category c) {
  static constexpr const char* kNames[] = {
      "GEMM (matmul, linear)", "attention (fused)", "fused kernels", "other element-wise", "dtype casts",
      "layout/copies",         "optimizer update",  "allocation",    "synchronisation",    "autodiff+framework (rest)"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kCategoryCount);
  return kNames[static_cast<int>(c)];
}

Category CategoryOf(OpId op) {
  switch (op) {
    case OpId::k_matmul:
    case OpId::k_linear: return Category::kGemm;
    case OpId::k_causal_attention:
    case OpId::k_causal_attention_backward: return Category::kAttention;
    case OpId::k_softmax_last:
    case OpId::k_softmax_last_backward:
    case OpId::k_norm_last:
    case OpId::k_norm_last_backward:
    case OpId::k_gelu:
    case OpId::k_gelu_backward:
    case OpId::k_cross_entropy_rows:
    case OpId::k_cross_entropy_rows_backward: return Category::kFused;
    case OpId::k_unary:
    case OpId::k_binary:
    case OpId::k_where:
    case OpId::k_reduce:
    case OpId::k_argmax: return Category::kElementwise;
    case OpId::k_cast: return Category::kCast;
    case OpId::k_sgd_update:
    case OpId::k_adamw_update: return Category::kOptimizer;
    default:  // creation, transfer, layout, gather/scatter, contiguous
      return Category::kLayout;
  }
}

const char* PhaseName(Phase p) {
  static constexpr const char* kNames[] = {"outside (hand-off to the member thread, return)", "forward + loss",
                                           "backward + gradient sync + clip", "optimizer"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kPhaseCount);
  return kNames[static_cast<int>(p)];
}

Profile& Profile::operator+=(const Profile& other) {
  for (int i = 0; i < kOpCount; ++i) {
    ops[i].ns += other.ops[i].ns;
    ops[i].calls += other.ops[i].calls;
  }
  for (int i = 0; i < kCategoryCount; ++i) {
    categories[i].ns += other.categories[i].ns;
    categories[i].calls += other.categories[i].calls;
  }
  for (int i = 0; i < kPhaseCount; ++i) phase_ns[i] += other.phase_ns[i];
  wall_ns += other.wall_ns;
  return *this;
}

void Profile::Finish() {
  int64_t covered = 0;
  for (int i = 0; i < kCategoryCount; ++i) {
    if (i != static_cast<int>(Category::kFramework)) covered += categories[i].ns;
  }
  categories[static_cast<int>(Category::kFramework)] = {wall_ns - covered, 0};
}

void OpProfile::Start() {
  Recording& r = GetRecording();
  std::lock_guard lock(r.mu);
  r.profile = Profile{};
  r.phase = Phase::kOutside;
  cpu::SetProfileCounting(true);
  r.counts_at_start = cpu::ReadProfileCounts();
  r.start_ns = r.phase_start_ns = Now();
  on_.store(true, std::memory_order_relaxed);
}

Profile OpProfile::Stop() {
  Recording& r = GetRecording();
  std::lock_guard lock(r.mu);
  const int64_t end = Now();
  on_.store(false, std::memory_order_relaxed);
  cpu::SetProfileCounting(false);
  const cpu::ProfileCounts counts = cpu::ReadProfileCounts();
  Profile p = r.profile;
  p.wall_ns = end - r.start_ns;
  p.phase_ns[static_cast<int>(r.phase)] += end - r.phase_start_ns;
  p.categories[static_cast<int>(Category::kAllocation)] = {counts.allocation_ns - r.counts_at_start.allocation_ns,
                                                           counts.allocations - r.counts_at_start.allocations};
  p.categories[static_cast<int>(Category::kSynchronisation)] = {
      counts.synchronisation_ns - r.counts_at_start.synchronisation_ns,
      counts.synchronisations - r.counts_at_start.synchronisations};
  p.Finish();
  return p;
}

void OpProfile::AddOp(OpId op, int64_t ns) {
  Profile& p = GetRecording().profile;
  const Category c = optimizer_depth_ > 0 ? Category::kOptimizer : CategoryOf(op);
  p.ops[static_cast<int>(op)].ns += ns;
  ++p.ops[static_cast<int>(op)].calls;
  p.categories[static_cast<int>(c)].ns += ns;
  ++p.categories[static_cast<int>(c)].calls;
}

void OpProfile::MarkPhase(Phase phase) {
  if (!on()) return;
  Recording& r = GetRecording();
  std::lock_guard lock(r.mu);
  if (phase == r.phase) return;
  const int64_t now = Now();
  r.profile.phase_ns[static_cast<int>(r.phase)] += now - r.phase_start_ns;
  r.phase = phase;
  r.phase_start_ns = now;
}

OpTimer::OpTimer(OpId op) : op_(op), on_(OpProfile::on() && op_depth++ == 0) {
  if (!on_) return;
  counts_ = cpu::ReadProfileCounts();
  start_ns_ = Now();
}

OpTimer::~OpTimer() {
  if (!on_) {
    if (op_depth > 0) --op_depth;
    return;
  }
  --op_depth;
  const int64_t ns = Now() - start_ns_;
  const cpu::ProfileCounts now = cpu::ReadProfileCounts();
  const int64_t inside =
      (now.allocation_ns - counts_.allocation_ns) + (now.synchronisation_ns - counts_.synchronisation_ns);
  OpProfile::AddOp(op_, ns - inside);
}

std::string FormatProfile(const Profile& total, int steps, int top_ops) {
  const double per_step_ms = 1e-6 / std::max(steps, 1);
  const double wall_ms = total.wall_ns * per_step_ms;
  std::string out = absl::StrFormat("  %-28s %10s %7s %9s\n", "category", "ms/step", "share", "calls/step");
  for (int i = 0; i < kCategoryCount; ++i) {
    const Totals& t = total.categories[i];
    out += absl::StrFormat("  %-28s %10.2f %6.1f%% %9.0f\n", CategoryName(static_cast<Category>(i)), t.ns * per_step_ms,
                           100.0 * t.ns / std::max<int64_t>(total.wall_ns, 1),
                           static_cast<double>(t.calls) / std::max(steps, 1));
  }
  out += absl::StrFormat("  %-28s %10.2f %6.1f%%\n", "step (wall)", wall_ms, 100.0);
  out += "  phases:\n";
  for (int i = 0; i < kPhaseCount; ++i) {
    out += absl::StrFormat("    %-46s %10.2f ms\n", PhaseName(static_cast<Phase>(i)), total.phase_ns[i] * per_step_ms);
  }
  std::vector<int> order(kOpCount);
  for (int i = 0; i < kOpCount; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return total.ops[a].ns > total.ops[b].ns; });
  out += absl::StrFormat("  slowest ops (excluding their allocation and waits):\n");
  for (int k = 0; k < std::min(top_ops, kOpCount) && total.ops[order[k]].calls > 0; ++k) {
    const Totals& t = total.ops[order[k]];
    out +=
        absl::StrFormat("    %-30s %10.2f ms %6.1f%% %7.0f calls  %8.1f us/call\n", OpName(static_cast<OpId>(order[k])),
                        t.ns * per_step_ms, 100.0 * t.ns / std::max<int64_t>(total.wall_ns, 1),
                        static_cast<double>(t.calls) / std::max(steps, 1), t.ns * 1e-3 / std::max<int64_t>(t.calls, 1));
  }
  return out;
}

}  // namespace kiln::bench
