// GradientSync: gradient all-reduce as a backward op. Hooks on a replica's parameters fire the
// moment each gradient is final during backward; the gradient joins its bucket, and a full
// bucket is all-reduced by a communication thread while backward goes on computing the rest
// (in one process on a host-staged engine, by backward's own thread as it fills: inline_reduce).
// Buckets are fixed up front (parameters in reverse order, as backward produces them, filled
// to bucket_bytes) and reduced in bucket order on every member, each tagged with its step and
// bucket, so members cannot mix rounds. A parameter a step did not use counts as a zero
// gradient when the step finishes. With sync turned off, gradients accumulate locally and
// are all-reduced, summed, on the next step that syncs (micro-batches).
// Sharded (SyncOptions::sharding, shard_layout.h): each bucket travels member-major and each
// member keeps only its chunk of every gradient (FinishShards), from an all-reduce
// (kOptimizer) or, halving the bytes moved and never holding the others' part, a
// reduce-scatter (kGradients and kParameters).
#ifndef KILN_DISTRIBUTED_GRADIENT_SYNC_H_
#define KILN_DISTRIBUTED_GRADIENT_SYNC_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "autodiff/autodiff.h"
#include "distributed/bucket_plan.h"
#include "distributed/device_group.h"
#include "distributed/shard_layout.h"
#include "distributed/sharding.h"
#include "nn/module.h"

namespace kiln::distributed {

struct SyncOptions {
  // Bytes of gradients per bucket; unset: kDdpBucketBytes unsharded, kShardedBucketBytes
  // sharded (BucketBytes).
  std::optional<int64_t> bucket_bytes;
  ReduceOp reduce = ReduceOp::kMean;
  // The dtype buckets travel and are reduced in, when not the gradients' own: kBF16 halves the
  // bytes of f32 gradients (PyTorch's bf16 compression hook). Each member rounds its bucket to
  // it, the reduction accumulates in f32 and rounds once, and every member widens the same
  // result back, so replicas stay identical.
  std::optional<DType> reduce_dtype;
  // What data parallelism shards (sharding.h); the gradient sync shards the gradients for
  // every stage but kNone.
  Sharding sharding = Sharding::kNone;
  // kParameters only: how units are gathered and freed (sharding.h).
  ParameterShardingOptions parameters;
};

inline constexpr int64_t kDdpBucketBytes = int64_t{25} << 20;  // as PyTorch DDP's default
// Sharded, a member holds a bucket's whole gradients, then the bucket packed member-major,
// beside the model state it keeps (1/N of the gradients and optimizer state): at 25 MiB that
// transient outweighs a 25M-parameter model's gradient chunks at N = 4. 4 MiB keeps a member's
// in-step peak within ZeRO's bounds there (bench/shard_memory.cc, README) for ~25 collectives
// a step instead of ~5.
inline constexpr int64_t kShardedBucketBytes = int64_t{4} << 20;

inline int64_t BucketBytes(const SyncOptions& options) {
  if (options.bucket_bytes) return *options.bucket_bytes;
  return options.sharding == Sharding::kNone ? kDdpBucketBytes : kShardedBucketBytes;
}

// See GradientSync::State::inline_reduce.
template <Backend B>
bool InlineReduce(const DeviceGroup<B>& group) {
  return group.processes() == 1 && std::is_same_v<typename DeviceGroup<B>::Engine, HostStagedEngine<B>>;
}

template <Backend B>
class GradientSync {
 public:
  using AD = Autodiff<B>;
  using P = typename B::Primitive;

  GradientSync(DeviceGroup<B>& group, int member, nn::Module<AD>& replica, SyncOptions options = {})
      : state_(std::make_shared<State>(group, member, options)) {
    auto params = replica.named_parameters();
    State& s = *state_;
    for (auto& [name, p] : params) {
      s.names.push_back(name);
      s.shapes.push_back(p->shape());
      s.dtypes.push_back(p->dtype());
    }
    // Buckets in reverse parameter order, the order backward finishes gradients in
    // (bucket_plan.h: sharded, large parameters travel alone).
    std::vector<int64_t> bytes;
    for (auto& [name, p] : params) bytes.push_back(p->numel() * DTypeSize(p->dtype()));
    s.buckets = PlanBuckets(bytes, BucketBytes(options), s.sharded());
    s.bucket_of.resize(params.size());
    for (size_t k = 0; k < s.buckets.size(); ++k) {
      for (int i : s.buckets[k]) s.bucket_of[i] = static_cast<int>(k);
    }
    s.Reset();
    for (size_t i = 0; i < params.size(); ++i) {
      s.ids.push_back(params[i].second->primitive().node->id);
      std::weak_ptr<State> weak = state_;
      // Sharded, the sync takes each gradient: backward's result would hold every whole one.
      params[i].second->register_hook(
          [weak, i](const Tensor<B>& g) {
            if (auto st = weak.lock()) st->OnGradient(static_cast<int>(i), g.primitive());
          },
          /*takes_gradient=*/s.sharded());
    }
    s.comm = std::thread([st = state_] { st->CommLoop(); });
  }
  ~GradientSync() {
    {
      std::lock_guard lock(state_->mu);
      state_->stop = true;
      state_->Notify();
    }
    state_->comm.join();
  }
  GradientSync(const GradientSync&) = delete;
  GradientSync& operator=(const GradientSync&) = delete;

  // Off: the coming backward passes accumulate locally; on: the next one syncs everything.
  void set_sync_enabled(bool on) {
    std::lock_guard lock(state_->mu);
    state_->enabled = on;
  }
  int bucket_count() const { return static_cast<int>(state_->buckets.size()); }
  // How many times the communication thread has woken (tests and diagnostics): in one process,
  // where backward's own thread reduces the buckets, only a queued job wakes it.
  int64_t communication_wakeups() const {
    std::lock_guard lock(state_->mu);
    return state_->comm_wakeups;
  }
  // Each bucket's parameter indices, in the order buckets are reduced.
  const std::vector<std::vector<int>>& buckets() const { return state_->buckets; }
  // How many buckets of the last finished step were full, and so handed to communication,
  // before Finish: while backward was still running.
  int buckets_started_in_backward() const {
    std::lock_guard lock(state_->mu);
    return state_->started_in_backward;
  }

  // Runs `job` (collectives of this member, such as ZeRO-3's parameter gathers) on the
  // communication thread: after the buckets that backward has filled so far are reduced and
  // before any bucket it fills later. Every member makes its calls and fills its buckets in
  // the same order, so every member runs its jobs and reductions in one order on one thread,
  // as collectives must be. A failed group fails the jobs still queued.
  std::future<absl::Status> Enqueue(std::function<absl::Status()> job) {
    State& s = *state_;
    std::promise<absl::Status> promise;
    std::future<absl::Status> result = promise.get_future();
    std::lock_guard lock(s.mu);
    if (!s.error.ok()) {
      promise.set_value(s.error);
      return result;
    }
    s.jobs.push_back({s.filled, std::move(job), std::move(promise)});
    s.Notify();
    return result;
  }

  // After backward: the all-reduced gradients of every parameter (those a step left without a
  // gradient count as zero). With sync off it returns `local` unchanged. Not when sharded.
  absl::StatusOr<Gradients<B>> Finish(const Gradients<B>& local) {
    State& s = *state_;
    if (s.sharded()) return absl::FailedPreconditionError("gradient sync: sharded; call FinishShards");
    std::unique_lock lock(s.mu);
    if (!s.error.ok()) return s.error;
    if (!s.enabled) return local;
    if (absl::Status status = s.WaitForBuckets(lock); !status.ok()) return status;
    Gradients<B> out;
    for (size_t i = 0; i < s.names.size(); ++i) out.Set(s.ids[i], *s.results[i]);
    s.EndStep();
    return out;
  }

  // Sharded: after a backward that syncs, this member's chunk of every parameter's reduced
  // gradient, in parameter order (shard_layout.h). FailedPrecondition with sync off: the
  // gradients are kept for the next step that syncs.
  absl::StatusOr<std::vector<Tensor<B>>> FinishShards() {
    State& s = *state_;
    if (!s.sharded()) return absl::FailedPreconditionError("gradient sync: not sharded; call Finish");
    std::unique_lock lock(s.mu);
    if (!s.error.ok()) return s.error;
    if (!s.enabled) {
      return absl::FailedPreconditionError("gradient sync: sync is off, so there are no shards to finish");
    }
    if (absl::Status status = s.WaitForBuckets(lock); !status.ok()) return status;
    std::vector<Tensor<B>> out;
    for (size_t i = 0; i < s.names.size(); ++i) out.emplace_back(*s.results[i]);
    s.EndStep();
    return out;
  }

 private:
  struct State {
    State(DeviceGroup<B>& g, int r, SyncOptions o) : group(g), member(r), options(o) {}

    bool sharded() const { return options.sharding != Sharding::kNone; }

    // Hands every gradient the step left out to its bucket (its accumulated value, or zero)
    // and waits for every bucket's reduction. `lock` holds mu.
    absl::Status WaitForBuckets(std::unique_lock<std::mutex>& lock) {
      started_in_backward = 0;
      for (int left : remaining) started_in_backward += left == 0;
      for (size_t i = 0; i < names.size(); ++i) {
        if (!grads[i] && !taken[i]) {
          Deliver(static_cast<int>(i),
                  pending[i] ? *pending[i] : B::full(shapes[i], 0, dtypes[i], group.devices()[member]));
        }
      }
      // The buckets still to reduce run here when no collective is running (at the end of
      // backward, a small model's only bucket: no waking the communication thread and being
      // woken); jobs still queued run on that thread, each in its place among the buckets.
      Notify();
      while (true) {
        cv.wait(lock, [&] { return AllDone() || !error.ok() || NextReady(); });
        if (AllDone() || !error.ok()) return error;
        ReduceNext(lock);
      }
    }
    void EndStep() {
      ++step;
      Reset();
    }

    void Reset() {
      grads.assign(names.size(), std::nullopt);
      taken.assign(names.size(), false);
      results.assign(names.size(), std::nullopt);
      pending.resize(names.size());
      remaining.clear();
      for (const auto& b : buckets) remaining.push_back(static_cast<int>(b.size()));
      done = 0;
      started = 0;
      filled = 0;
    }

    // Called from the backward thread by a parameter's hook. In one process on a host-staged
    // engine, the bucket it fills is reduced right here (InlineReduce).
    void OnGradient(int i, const P& g) {
      std::unique_lock lock(mu);
      if (!enabled) {
        pending[i] = pending[i] ? B::binary(BinaryOp::kAdd, *pending[i], g) : g;
        return;
      }
      if (grads[i] || taken[i]) {
        error = absl::FailedPreconditionError(
            absl::StrCat("gradient sync: parameter ", names[i], " got a second gradient in step ", step,
                         " before Finish; call Finish after every backward that syncs"));
        Notify();
        return;
      }
      Deliver(i, pending[i] ? B::binary(BinaryOp::kAdd, *pending[i], g) : g);
      while (inline_reduce && error.ok() && NextReady()) ReduceNext(lock);
    }

    // A full bucket wakes the communication thread, except the last (backward is over by then,
    // so Finish reduces it on the member's own thread) and except when the backward thread
    // reduces it itself (inline_reduce: a job that holds it up is running on the communication
    // thread, which looks for ready buckets when the job ends).
    void Deliver(int i, P g) {
      grads[i] = std::move(g);
      pending[i].reset();
      const int k = bucket_of[i];
      if (--remaining[k] == 0 && k + 1 < static_cast<int>(buckets.size()) && !inline_reduce) Notify();
      while (filled < static_cast<int>(buckets.size()) && remaining[filled] == 0) ++filled;
    }

    // After a change of state (`mu` held): wakes the member waiting in Finish, and the
    // communication thread only when it may have work: a job queued, a bucket to reduce (not
    // inline_reduce), or stop. Woken for nothing, it would take a core from backward and
    // contend for `mu` several times a step (perf on a 2-core machine: a tenth of the step in
    // the scheduler).
    void Notify() {
      cv.notify_all();
      if (stop || !inline_reduce || !jobs.empty()) comm_cv.notify_all();
    }

    // A member's collectives run one at a time, on this thread or the one in Finish: the next
    // bucket once it is full, or before it the jobs queued before it filled. `mu` held.
    bool Idle() const { return !reducing && !job_running; }
    bool JobDue() const { return !jobs.empty() && jobs.front().after <= started; }
    bool JobReady() const { return Idle() && JobDue(); }
    bool NextReady() const {
      return Idle() && !JobDue() && started < static_cast<int>(buckets.size()) && remaining[started] == 0;
    }
    bool AllDone() const { return done == static_cast<int>(buckets.size()) && jobs.empty() && !job_running; }

    // Runs the first job (lock held on entry and exit, not while it runs).
    void RunJob(std::unique_lock<std::mutex>& lock) {
      Job job = std::move(jobs.front());
      jobs.pop_front();
      job_running = true;
      lock.unlock();
      absl::Status status;
      try {
        status = job.run();
      } catch (const Error& e) {
        status = e.status();
      } catch (const std::bad_alloc&) {
        status = absl::ResourceExhaustedError("out of memory (std::bad_alloc) in a collective job");
      }
      job.done.set_value(status);
      lock.lock();
      job_running = false;
      Notify();
    }
    // The group is broken: fail every queued job.
    void FailJobs(const absl::Status& status) {
      for (Job& job : jobs) job.done.set_value(status);
      jobs.clear();
    }

    // Reduces bucket after bucket, in order, as each fills, and runs the jobs in their places.
    void CommLoop() {
      std::unique_lock lock(mu);
      while (true) {
        while (!(stop || (error.ok() && (JobReady() || NextReady())))) {
          comm_cv.wait(lock);
          ++comm_wakeups;
        }
        if (stop) {
          FailJobs(absl::CancelledError("gradient sync: stopped before the job ran"));
          return;
        }
        if (JobReady()) {
          RunJob(lock);
          continue;
        }
        ReduceNext(lock);
      }
    }

    // Reduces the next bucket (NextReady), unlocking `lock` meanwhile. A failure marks the
    // group broken: error is set and no bucket starts again.
    void ReduceNext(std::unique_lock<std::mutex>& lock) {
      const int k = started++;
      if (group.global_size() == 1) {  // a reduction over one member is the identity: no copy
        for (int i : buckets[k]) results[i] = sharded() ? Tensor<B>(*grads[i]).reshape({-1}).primitive() : *grads[i];
        ++done;
        Notify();
        return;
      }
      std::vector<Tensor<B>> parts;
      for (int i : buckets[k]) {
        parts.push_back(Tensor<B>(*grads[i]));
        grads[i].reset();  // the bucket holds it now: a sharded step keeps no full gradient
        taken[i] = true;
      }
      const uint64_t this_step = step;
      reducing = true;
      lock.unlock();
      absl::StatusOr<std::vector<Tensor<B>>> reduced = Reduce(k, std::move(parts), this_step);
      lock.lock();
      reducing = false;
      if (!reduced.ok()) {  // the group is broken: report it and do nothing more
        error = reduced.status();
        FailJobs(error);
        Notify();
        return;
      }
      for (size_t j = 0; j < buckets[k].size(); ++j) results[buckets[k][j]] = (*reduced)[j].primitive();
      ++done;
      Notify();
    }

    // Bucket k's reduction: each parameter's reduced gradient, or this member's chunk of it.
    // Takes `parts` so that, sharded, each whole gradient is freed once it is packed.
    absl::StatusOr<std::vector<Tensor<B>>> Reduce(int k, std::vector<Tensor<B>> parts, uint64_t this_step) {
      const std::string tag = absl::StrCat("step ", this_step, " bucket ", k);
      const int n = group.global_size(), g = group.global_rank(member);
      try {
        Tensor<B> bucket = sharded() ? PackMemberMajor<B>(parts, n) : FlatBucket(parts);
        parts.clear();
        const DType own = bucket.dtype();
        if (options.reduce_dtype) bucket = bucket.to(*options.reduce_dtype);
        absl::StatusOr<Tensor<B>> reduced = absl::UnknownError("not run");
        if (options.sharding == Sharding::kNone || options.sharding == Sharding::kOptimizer) {
          reduced = group.AllReduce(member, std::move(bucket), options.reduce, tag);
          if (reduced.ok() && sharded())
            reduced = reduced->slice(0, reduced->numel() / n * g, reduced->numel() / n * (g + 1));
        } else {
          reduced = group.ReduceScatter(member, bucket, options.reduce, tag);
        }
        if (!reduced.ok()) return reduced.status();
        const Tensor<B> result = reduced->to(own);
        if (sharded()) {
          std::vector<int64_t> chunks;
          for (int i : buckets[k]) chunks.push_back(ChunkSize(shapes[i].numel(), n));
          return SplitChunks(result, chunks);
        }
        std::vector<Tensor<B>> out;
        int64_t at = 0;
        for (int i : buckets[k]) {
          const int64_t count = shapes[i].numel();
          out.push_back(result.slice(0, at, at + count).reshape(shapes[i].dims()));
          at += count;
        }
        return out;
      } catch (const Error& e) {
        return e.status();
      } catch (const std::bad_alloc&) {  // escaping this thread would abort the program
        return absl::ResourceExhaustedError("out of memory (std::bad_alloc) reducing a gradient bucket");
      }
    }
    static Tensor<B> FlatBucket(const std::vector<Tensor<B>>& parts) {
      std::vector<Tensor<B>> flat;
      for (const Tensor<B>& p : parts) flat.push_back(p.reshape({-1}));
      return Tensor<B>::cat(flat, 0);
    }

    DeviceGroup<B>& group;
    const int member;
    const SyncOptions options;
    // Whether backward's thread reduces each bucket as it fills rather than handing it to the
    // communication thread: when every member is a thread of this process on a host-staged
    // engine, a reduction is work on the members' own cores and a rendezvous of their threads,
    // so a second thread per member only adds hand-offs (and, on a machine whose cores the
    // members fill, takes turns with backward for a core). Across processes the thread lets
    // backward go on while the bytes travel. ZeRO-3's gathers stay on it either way (Enqueue).
    const bool inline_reduce = InlineReduce(group);
    std::vector<std::string> names;
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    std::vector<uint64_t> ids;
    std::vector<std::vector<int>> buckets;
    std::vector<int> bucket_of;

    mutable std::mutex mu;
    std::condition_variable cv;       // the member waiting in Finish
    std::condition_variable comm_cv;  // the communication thread (Notify)
    int64_t comm_wakeups = 0;
    std::vector<std::optional<P>> grads, results, pending;
    std::vector<char> taken;  // handed to its bucket's reduction this step
    std::vector<int> remaining;
    int done = 0, started = 0, started_in_backward = 0;  // buckets reduced, and begun
    bool reducing = false;                               // a bucket's reduction is running
    // Jobs (Enqueue) in call order, each after the buckets filled when it was queued.
    struct Job {
      int after;
      std::function<absl::Status()> run;
      std::promise<absl::Status> done;
    };
    std::deque<Job> jobs;
    bool job_running = false;
    int filled = 0;  // leading buckets that are full (backward fills them in order on every member)
    uint64_t step = 0;
    bool enabled = true, stop = false;
    absl::Status error;
    std::thread comm;
  };

  std::shared_ptr<State> state_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GRADIENT_SYNC_H_
