// GradientSync: gradient all-reduce as a backward op. Hooks on a replica's parameters fire the
// moment each gradient is final during backward; the gradient joins its bucket, and a full
// bucket is all-reduced by a communication thread while backward goes on computing the rest.
// Buckets are fixed up front (parameters in reverse order, as backward produces them, filled
// to bucket_bytes) and reduced in bucket order on every member, each tagged with its step and
// bucket, so members cannot mix rounds. A parameter a step did not use counts as a zero
// gradient when the step finishes. With sync turned off, gradients accumulate locally and
// are all-reduced, summed, on the next step that syncs (micro-batches).
#ifndef KILN_DISTRIBUTED_GRADIENT_SYNC_H_
#define KILN_DISTRIBUTED_GRADIENT_SYNC_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "autodiff/autodiff.h"
#include "distributed/device_group.h"
#include "nn/module.h"

namespace kiln::distributed {

struct SyncOptions {
  int64_t bucket_bytes = int64_t{25} << 20;  // as PyTorch DDP's default
  ReduceOp reduce = ReduceOp::kMean;
  // The dtype buckets travel and are reduced in, when not the gradients' own: kBF16 halves the
  // bytes of f32 gradients (PyTorch's bf16 compression hook). Each member rounds its bucket to
  // it, the reduction accumulates in f32 and rounds once, and every member widens the same
  // result back, so replicas stay identical.
  std::optional<DType> reduce_dtype;
};

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
    // Buckets in reverse parameter order: the order backward finishes gradients in.
    int64_t bytes = 0;
    s.bucket_of.resize(params.size());
    for (int i = static_cast<int>(params.size()) - 1; i >= 0; --i) {
      const int64_t size = params[i].second->numel() * DTypeSize(params[i].second->dtype());
      if (s.buckets.empty() || (bytes > 0 && bytes + size > options.bucket_bytes)) {
        s.buckets.emplace_back();
        bytes = 0;
      }
      s.buckets.back().push_back(i);
      s.bucket_of[i] = static_cast<int>(s.buckets.size()) - 1;
      bytes += size;
    }
    s.Reset();
    for (size_t i = 0; i < params.size(); ++i) {
      s.ids.push_back(params[i].second->primitive().node->id);
      std::weak_ptr<State> weak = state_;
      params[i].second->register_hook([weak, i](const Tensor<B>& g) {
        if (auto st = weak.lock()) st->OnGradient(static_cast<int>(i), g.primitive());
      });
    }
    s.comm = std::thread([st = state_] { st->CommLoop(); });
  }
  ~GradientSync() {
    {
      std::lock_guard lock(state_->mu);
      state_->stop = true;
    }
    state_->cv.notify_all();
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
  // How many buckets of the last finished step were full, and so handed to communication,
  // before Finish: while backward was still running.
  int buckets_started_in_backward() const {
    std::lock_guard lock(state_->mu);
    return state_->started_in_backward;
  }

  // After backward: the all-reduced gradients of every parameter (those a step left without a
  // gradient count as zero). With sync off it returns `local` unchanged.
  absl::StatusOr<Gradients<B>> Finish(const Gradients<B>& local) {
    State& s = *state_;
    std::unique_lock lock(s.mu);
    if (!s.error.ok()) return s.error;
    if (!s.enabled) return local;
    s.started_in_backward = 0;
    for (int left : s.remaining) s.started_in_backward += left == 0;
    for (size_t i = 0; i < s.names.size(); ++i) {
      if (!s.grads[i]) {  // unused this step: its accumulated gradient, or zero
        s.Deliver(static_cast<int>(i),
                  s.pending[i] ? *s.pending[i] : B::full(s.shapes[i], 0, s.dtypes[i], s.group.devices()[s.member]));
      }
    }
    s.cv.notify_all();
    s.cv.wait(lock, [&] { return s.done == static_cast<int>(s.buckets.size()) || !s.error.ok(); });
    if (!s.error.ok()) return s.error;
    Gradients<B> out;
    for (size_t i = 0; i < s.names.size(); ++i) out.Set(s.ids[i], *s.results[i]);
    ++s.step;
    s.Reset();
    return out;
  }

 private:
  struct State {
    State(DeviceGroup<B>& g, int r, SyncOptions o) : group(g), member(r), options(o) {}

    void Reset() {
      grads.assign(names.size(), std::nullopt);
      results.assign(names.size(), std::nullopt);
      pending.resize(names.size());
      remaining.clear();
      for (const auto& b : buckets) remaining.push_back(static_cast<int>(b.size()));
      done = 0;
    }

    // Called from the backward thread by a parameter's hook, or by Finish (lock held there).
    void OnGradient(int i, const P& g) {
      std::lock_guard lock(mu);
      if (!enabled) {
        pending[i] = pending[i] ? B::binary(BinaryOp::kAdd, *pending[i], g) : g;
        return;
      }
      if (grads[i]) {
        error = absl::FailedPreconditionError(
            absl::StrCat("gradient sync: parameter ", names[i], " got a second gradient in step ", step,
                         " before Finish; call Finish after every backward that syncs"));
        cv.notify_all();
        return;
      }
      Deliver(i, pending[i] ? B::binary(BinaryOp::kAdd, *pending[i], g) : g);
    }

    void Deliver(int i, P g) {
      grads[i] = std::move(g);
      pending[i].reset();
      if (--remaining[bucket_of[i]] == 0) cv.notify_all();
    }

    // Reduces bucket after bucket, in order, as each fills.
    void CommLoop() {
      std::unique_lock lock(mu);
      while (true) {
        cv.wait(lock, [&] { return stop || (done < static_cast<int>(buckets.size()) && remaining[done] == 0); });
        if (stop) return;
        const int k = done;
        if (group.global_size() == 1) {  // an all-reduce over one member is the identity: no copy
          for (int i : buckets[k]) results[i] = grads[i];
          ++done;
          cv.notify_all();
          continue;
        }
        std::vector<Tensor<B>> flat;
        for (int i : buckets[k]) flat.push_back(Tensor<B>(*grads[i]).reshape({-1}));
        const uint64_t this_step = step;
        lock.unlock();
        absl::StatusOr<Tensor<B>> reduced = absl::UnknownError("not run");
        try {
          Tensor<B> bucket = Tensor<B>::cat(flat, 0);
          const DType own = bucket.dtype();
          if (options.reduce_dtype) bucket = bucket.to(*options.reduce_dtype);
          reduced = group.AllReduce(member, bucket, options.reduce, absl::StrCat("step ", this_step, " bucket ", k));
          if (reduced.ok()) reduced = reduced->to(own);
        } catch (const Error& e) {
          reduced = e.status();
        } catch (const std::bad_alloc&) {  // escaping this thread would abort the program
          reduced = absl::ResourceExhaustedError("out of memory (std::bad_alloc) reducing a gradient bucket");
        }
        lock.lock();
        if (!reduced.ok()) {  // the group is broken: report it and do nothing more
          error = reduced.status();
          cv.notify_all();
          cv.wait(lock, [&] { return stop; });
          return;
        }
        int64_t at = 0;
        for (int i : buckets[k]) {
          const int64_t n = shapes[i].numel();
          results[i] = reduced->slice(0, at, at + n).reshape(shapes[i].dims()).primitive();
          at += n;
        }
        ++done;
        cv.notify_all();
      }
    }

    DeviceGroup<B>& group;
    const int member;
    const SyncOptions options;
    std::vector<std::string> names;
    std::vector<Shape> shapes;
    std::vector<DType> dtypes;
    std::vector<uint64_t> ids;
    std::vector<std::vector<int>> buckets;
    std::vector<int> bucket_of;

    mutable std::mutex mu;
    std::condition_variable cv;
    std::vector<std::optional<P>> grads, results, pending;
    std::vector<int> remaining;
    int done = 0, started_in_backward = 0;
    uint64_t step = 0;
    bool enabled = true, stop = false;
    absl::Status error;
    std::thread comm;
  };

  std::shared_ptr<State> state_;
};

}  // namespace kiln::distributed

#endif  // KILN_DISTRIBUTED_GRADIENT_SYNC_H_
