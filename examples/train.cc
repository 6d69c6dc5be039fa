// The main job: trains an MLP or a small CNN on Fashion-MNIST, evaluates on the 10,000 test
// images after every epoch, and prints one JSON line with the result as its last output.
//
//   ./bazelw run //examples:train -- --model=mlp --epochs=10
//
// Under a launcher (tools/launch, srun, mpirun; see distributed/process/launch_env.h) every process
// trains data-parallel over its --devices and joins the others through a Gloo process group:
// the global batch is split over every device of every process. CPU and Vulkan tensors cross
// processes through Gloo; CUDA tensors through one NCCL communicator over every GPU, the Gloo
// group carrying only its set-up and checks. A GPU belongs to one process: with
// --devices=cuda:0,cuda:1 the process with local rank l trains on GPUs 2l and 2l + 1. Rank 0 evaluates, prints and
// writes the checkpoint (the others wait for it at their next collective).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "autodiff/autodiff.h"
#include "backends/dispatch/dispatch_device.h"
#include "data/idx.h"
#include "distributed/data_parallel.h"
#include "distributed/group.h"
#include "examples/command_line.h"
#include "examples/memory_budget.h"
#include "examples/memory_report.h"
#include "examples/progress.h"
#include "examples/run_checkpoints.h"
#include "examples/run_setup.h"
#include "examples/run_watch.h"
#include "examples/train_flags.h"
#include "examples/train_position.h"
#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/sequential.h"

namespace kiln {
namespace {

template <Backend B>
std::unique_ptr<nn::Sequential<Autodiff<B>>> BuildModel(const std::string& kind, Generator& gen,
                                                        const typename B::Device& device) {
  using AD = Autodiff<B>;
  auto net = std::make_unique<nn::Sequential<AD>>();
  if (kind == "mlp") {
    net->template add<nn::Flatten<AD>>()
        .template add<nn::Linear<AD>>(784, 256, gen, nn::LinearOptions{}, device)
        .template add<nn::ReLU<AD>>()
        .template add<nn::Linear<AD>>(256, 256, gen, nn::LinearOptions{}, device)
        .template add<nn::ReLU<AD>>()
        .template add<nn::Linear<AD>>(256, 10, gen, nn::LinearOptions{}, device);
  } else if (kind == "cnn") {
    const nn::Conv2dOptions same{.padding = 1};
    net->template add<nn::Conv2d<AD>>(1, 16, 3, gen, same, device)
        .template add<nn::ReLU<AD>>()
        .template add<nn::MaxPool2d<AD>>(2)
        .template add<nn::Conv2d<AD>>(16, 32, 3, gen, same, device)
        .template add<nn::ReLU<AD>>()
        .template add<nn::MaxPool2d<AD>>(2)
        .template add<nn::Flatten<AD>>()
        .template add<nn::Linear<AD>>(32 * 7 * 7, 128, gen, nn::LinearOptions{}, device)
        .template add<nn::ReLU<AD>>()
        .template add<nn::Dropout<AD>>(0.25, gen.NextU64())
        .template add<nn::Linear<AD>>(128, 10, gen, nn::LinearOptions{}, device);
  } else {
    throw UsageError{absl::StrCat("--model=", kind, ": expected mlp or cnn")};
  }
  return net;
}

// Images as the model takes them: [N, 784] rows reshaped by the model, [N, 1, 28, 28] for a CNN.
template <Backend B>
Tensor<B> Images(const TensorData& images, const std::string& model, const typename B::Device& device) {
  const Tensor<B> t = Tensor<B>::from_data(images, device);
  return model == "cnn" ? t.unsqueeze(1) : t;
}

template <Backend B>
double Evaluate(nn::Module<Autodiff<B>>& model, const Tensor<B>& images, const Tensor<B>& labels) {
  using T = Tensor<Autodiff<B>>;
  NoGradScope no_grad;
  model.eval();
  int64_t correct = 0;
  const int64_t n = images.size(0);
  for (int64_t start = 0; start < n; start += 1000) {
    const int64_t end = std::min(n, start + 1000);
    const Tensor<B> logits = model(T::from_inner(images.slice(0, start, end))).inner();
    correct += logits.argmax(1).eq(labels.slice(0, start, end)).sum().template item<int64_t>();
  }
  model.train();
  return static_cast<double>(correct) / static_cast<double>(n);
}

// A permutation of 0..n-1 from the run's generator (Fisher-Yates).
template <Backend B>
Tensor<B> Shuffle(int64_t n, Generator& gen, const typename B::Device& device) {
  std::vector<int64_t> order(n);
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(order[i], order[gen.NextU64() % (i + 1)]);
  return Tensor<B>::from_vector(order, {n}, device);
}

// A number for the JSON line, `decimals` after the point; JSON has no NaN or infinity.
std::string JsonNumber(double v, int decimals) {
  return std::isfinite(v) ? absl::StrFormat("%.*f", decimals, v) : "null";
}

int Fail(const absl::Status& s) {
  std::fprintf(stderr, "train: %s\n", std::string(s.message()).c_str());
  return 1;
}

// The training and test images and labels on `device`, the training set cut to --train_limit.
template <Backend B>
struct Data {
  Tensor<B> train_x, train_y, test_x, test_y;
};
template <Backend B>
Data<B> LoadData(const TrainConfig& c, const typename B::Device& device) {
  auto train = data::LoadFashionMnist(c.data_dir, "train");
  if (!train.ok()) throw UsageError{std::string(train.status().message())};
  auto test = data::LoadFashionMnist(c.data_dir, "t10k");
  if (!test.ok()) throw UsageError{std::string(test.status().message())};
  Data<B> d{.train_x = Images<B>(train->images, c.model, device),
            .train_y = Tensor<B>::from_data(train->labels, device),
            .test_x = Images<B>(test->images, c.model, device),
            .test_y = Tensor<B>::from_data(test->labels, device)};
  if (c.train_limit > 0 && c.train_limit < d.train_x.size(0)) {
    d.train_x = d.train_x.slice(0, 0, c.train_limit);
    d.train_y = d.train_y.slice(0, 0, c.train_limit);
  }
  return d;
}

// The model (drawn from `gen`), one replica and optimizer per device (one device is the same
// code with a group of one), loss scaling as asked.
template <Backend B>
std::unique_ptr<distributed::DataParallel<B>> MakeDataParallel(
    const TrainConfig& c, const std::shared_ptr<distributed::DeviceGroup<Autodiff<B>>>& group, Generator& gen) {
  const auto initial = BuildModel<B>(c.model, gen, group->devices()[0]);
  nn::SetPrecision(*initial, c.precision.precision);
  // Runs of 3 layers: the cnn's conv-relu-pool stages (their conv outputs are the big
  // activations), the mlp's flatten-linear-relu and linear-relu-linear.
  if (c.recompute) initial->set_recompute(3);
  auto make_optimizer = [&]() -> std::unique_ptr<nn::Optimizer<B>> {
    if (c.optimizer == "sgd") {
      return std::make_unique<nn::Sgd<B>>(c.lr, nn::SgdOptions{.momentum = 0.9, .weight_decay = c.weight_decay});
    }
    return std::make_unique<nn::AdamW<B>>(c.lr, nn::AdamWOptions{.weight_decay = c.weight_decay});
  };
  auto dp = distributed::DataParallel<B>::Create(*initial, group, make_optimizer,
                                                 {.reduce_dtype = c.precision.grad_sync, .sharding = c.shard});
  if (!dp.ok()) {
    // The first broadcast already crosses processes: a peer that fails there is no usage error.
    if (dp.status().code() != absl::StatusCode::kInvalidArgument) throw RunFailure{std::string(dp.status().message())};
    throw UsageError{std::string(dp.status().message())};
  }
  if (c.precision.loss_scaling()) (*dp)->set_loss_scaler(nn::LossScalerOptions{});
  return *std::move(dp);
}

struct Result {
  double accuracy, last_loss;
  int64_t steps;
  double samples_per_sec;
};

// The run's one JSON line; `checkpoint_fields` from RunCheckpoints::JsonFields.
template <Backend B>
void PrintResult(const TrainConfig& c, const std::vector<typename B::Device>& devices, int processes,
                 const distributed::DataParallel<B>& dp, const std::string& checkpoint_fields, const Result& r) {
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(absl::StrCat("\"", d.ToString(), "\""));
  std::string extra;
  if (processes > 1) absl::StrAppend(&extra, ",\"processes\":", processes);
  absl::StrAppend(&extra, ",\"precision\":\"", nn::PrecisionName(c.precision.precision), "\"");
  if (c.shard != distributed::Sharding::kNone) {
    absl::StrAppend(&extra, ",\"shard\":\"", distributed::ShardingName(c.shard), "\"");
  }
  if (c.precision.grad_sync) absl::StrAppend(&extra, ",\"grad_sync\":\"bf16\"");
  if (c.recompute) absl::StrAppend(&extra, ",\"recompute\":true");
  if (const nn::LossScaler* scaler = dp.loss_scaler()) {
    absl::StrAppend(&extra, ",\"loss_scale\":", JsonNumber(scaler->scale(), 0),
                    ",\"skipped_steps\":", scaler->skipped_steps());
  }
  absl::StrAppend(&extra, checkpoint_fields);
  std::printf(
      "{\"test_accuracy\":%s,\"train_loss\":%s,\"epochs\":%d,\"steps\":%lld,"
      "\"samples_per_sec\":%s%s,\"devices\":[%s]%s}\n",
      JsonNumber(r.accuracy, 4).c_str(), JsonNumber(r.last_loss, 4).c_str(), c.epochs, static_cast<long long>(r.steps),
      JsonNumber(r.samples_per_sec, 1).c_str(), MemoryJsonFields(DeviceMemory<B>(devices), ReadProcessMemory()).c_str(),
      absl::StrJoin(names, ",").c_str(), extra.c_str());
}

// Every step splits its batch over every device; a last batch smaller than that is left out.
int64_t StepsPerEpoch(const TrainConfig& c, int64_t n, int64_t members) {
  if (n < members) {
    throw UsageError{absl::StrCat("--train_limit=", c.train_limit, " leaves ", n, " training image(s) for ", members,
                                  " devices; each step needs at least one image per device")};
  }
  const int64_t batch = c.batch_size;
  return n / batch + (n % batch >= members ? 1 : 0);
}

// Where the run stands; a resumed run starts where its checkpoint left off, every replica
// and random stream as they were. `gen` continues the position's data stream.
template <Backend B>
TrainPosition Resume(const TrainConfig& c, RunCheckpoints<B>& checkpoints,
                     const std::vector<typename B::Device>& devices, int processes, int64_t members, int64_t n,
                     Generator& gen) {
  const int64_t batch = c.batch_size;
  TrainPosition here;
  here.members = members;
  here.devices =
      absl::StrCat(absl::StrJoin(devices, ",", [](std::string* out, const auto& d) { out->append(d.ToString()); }),
                   processes > 1 ? absl::StrCat(" x ", processes, " processes") : "");
  here.data_generator = gen.state();
  TrainPosition at = checkpoints.Resume(here, {.min_steps_per_epoch = n / batch,
                                               .max_steps_per_epoch = n / batch + (n % batch > 0 ? 1 : 0),
                                               .epochs = c.epochs,
                                               .next_epoch_at_end = true,
                                               .first_data_generator = here.data_generator,
                                               .draws_per_epoch = static_cast<uint64_t>(n - 1)});
  gen = Generator(at.data_generator);
  return at;
}

// The epochs of one run: what every step shares, and what the run adds up as it goes.
template <Backend B>
struct Epochs {
  const TrainConfig& c;
  const Data<B>& data;
  typename B::Device device;  // the first of this process's
  distributed::DataParallel<B>& dp;
  RunCheckpoints<B>& checkpoints;
  bool lead;  // evaluates, prints and writes the checkpoints
  int64_t n, steps_per_epoch;
  nn::CosineSchedule schedule;
  Progress progress;
  RunWatch& watch;  // --metrics, --tensorboard_dir (the lead's)
  double last_loss, accuracy = 0, train_seconds = 0, step_loss = NAN;
  int64_t samples = 0;
  bool evaluated = false;

  // One epoch from `at` on: its shuffle, its steps, its end.
  absl::Status Run(int64_t epoch, Generator& gen, TrainPosition& at) {
    at.epoch = epoch;
    at.data_generator = gen.state();
    const Tensor<B> order = Shuffle<B>(n, gen, device);
    const auto start = std::chrono::steady_clock::now();
    const int64_t first = at.step_in_epoch;
    for (int64_t b = first; b < steps_per_epoch; ++b) {
      if (absl::Status s = Step(epoch, b, order, at); !s.ok()) return s;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (lead)
        progress.Step(static_cast<int>(epoch), b + 1, at.loss_sum / (b + 1),
                      std::min(n, (b + 1) * c.batch_size) / std::max(seconds, 1e-9));
      const bool save = checkpoints.due(at.step) && b + 1 < steps_per_epoch;  // an epoch's end has its own
      if (lead) {
        const double samples_per_sec =
            (std::min(n, (b + 1) * c.batch_size) - first * c.batch_size) / std::max(seconds, 1e-9);
        if (absl::Status s = watch.Step({.step = at.step,
                                         .epoch = epoch,
                                         .loss = step_loss,
                                         .lr = dp.optimizer(0).lr(),
                                         .grad_norm = dp.last_grad_norm(),
                                         .loss_scale = dp.loss_scaler() ? dp.loss_scaler()->scale() : NAN,
                                         .per_sec = samples_per_sec,
                                         .peak_bytes = PeakBytes<B>(dp.group().devices())},
                                        save);
            !s.ok())
          return s;
      }
      if (save) {
        if (absl::Status s = checkpoints.Save(at); !s.ok()) return s;
      }
    }
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return End(epoch, gen, at);
  }

  // Step b of the epoch: batch b of `order`, split over every device.
  absl::Status Step(int64_t epoch, int64_t b, const Tensor<B>& order, TrainPosition& at) {
    using T = Tensor<Autodiff<B>>;
    const auto loss_fn = [](nn::Module<Autodiff<B>>& m, const T& x, const T& y) { return nn::CrossEntropy(m(x), y); };
    if (c.cosine) {
      for (int r = 0; r < dp.size(); ++r) dp.optimizer(r).set_lr(schedule(at.step));
    }
    const int64_t batch = c.batch_size;
    const Tensor<B> idx = order.slice(0, b * batch, std::min(n, (b + 1) * batch));
    const absl::StatusOr<double> loss =
        dp.Step(data.train_x.index_select(0, idx), data.train_y.index_select(0, idx), loss_fn);
    if (!loss.ok()) return loss.status();
    // The loss is the same on every rank (DataParallel sums it over the world), so every
    // rank stops here together.
    if (!std::isfinite(*loss)) {
      return absl::InternalError(absl::StrFormat(
          "the training loss became %g at epoch %lld, step %lld: the run diverged (lower --lr or --weight_decay)",
          *loss, static_cast<long long>(epoch), static_cast<long long>(at.step + 1)));
    }
    samples += idx.size(0);
    step_loss = *loss;
    at.loss_sum += *loss;
    at.step_in_epoch = b + 1;
    ++at.step;
    return absl::OkStatus();
  }

  // The epoch's end: its loss, the next epoch's position, the evaluation and the checkpoints.
  absl::Status End(int64_t epoch, const Generator& gen, TrainPosition& at) {
    last_loss = at.last_epoch_loss = at.loss_sum / steps_per_epoch;
    // The next epoch begins here: a checkpoint now resumes with its shuffle.
    at.epoch = epoch + 1;
    at.step_in_epoch = 0;
    at.loss_sum = 0;
    at.data_generator = gen.state();
    if (absl::Status s = dp.GatherParameters(); !s.ok()) return s;  // ZeRO-3: a collective of every rank
    if (lead) {
      accuracy = Evaluate(dp.replica(0), data.test_x, data.test_y);
      evaluated = true;
      progress.EndEpoch(static_cast<int>(epoch), last_loss, accuracy);
      const absl::Status logged = watch.Eval(
          {.step = at.step, .epoch = epoch, .values = {{"train_loss", last_loss}, {"test_accuracy", accuracy}}});
      if (!logged.ok()) return logged;
      if (!c.checkpoint.empty()) {
        if (absl::Status s = nn::SaveCheckpoint(c.checkpoint, dp.replica(0)); !s.ok()) return s;
      }
    }
    if (checkpoints.enabled()) {
      if (absl::Status s = checkpoints.Save(at); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
};

// Training proper, with backend B's tensors on `devices` (one replica each), one rank of
// `processes` (the group holds the process group when there are several).
template <Backend B>
int TrainOn(const TrainConfig& c, const std::shared_ptr<distributed::DeviceGroup<Autodiff<B>>>& group,
            CheckpointPlan& plan, int rank, int processes) {
  const std::vector<typename B::Device>& devices = group->devices();
  const Data<B> data = LoadData<B>(c, devices[0]);
  const int64_t members = static_cast<int64_t>(devices.size()) * processes;
  const int64_t n = data.train_x.size(0);
  const int64_t steps_per_epoch = StepsPerEpoch(c, n, members);

  Generator gen(c.seed);
  const auto dp = MakeDataParallel<B>(c, group, gen);
  const bool lead = rank == 0;  // evaluates, prints and writes the checkpoints
  RunCheckpoints<B> checkpoints(c.checkpoints, std::move(plan), MathSettings(c), *dp, lead);
  TrainPosition at = Resume(c, checkpoints, devices, processes, members, n, gen);
  RunWatch watch(c.watch, "samples");
  if (absl::Status s = lead ? watch.Open(at.step) : absl::OkStatus(); !s.ok()) return Fail(s);

  Epochs<B> epochs{.c = c,
                   .data = data,
                   .device = devices[0],
                   .dp = *dp,
                   .checkpoints = checkpoints,
                   .lead = lead,
                   .n = n,
                   .steps_per_epoch = steps_per_epoch,
                   .schedule = {.base_lr = c.lr, .total_steps = steps_per_epoch * c.epochs, .min_lr = c.lr * 0.01},
                   .progress = Progress(lead && isatty(STDOUT_FILENO), steps_per_epoch, c.epochs, "samples",
                                        MemoryStatus<B>(devices)),
                   .watch = watch,
                   .last_loss = at.last_epoch_loss};
  for (int64_t epoch = at.epoch; epoch <= c.epochs; ++epoch) {
    if (absl::Status s = epochs.Run(epoch, gen, at); !s.ok()) return Fail(s);
  }
  if (absl::Status s = checkpoints.Finish(); !s.ok()) return Fail(s);
  if (absl::Status s = dp->GatherParameters(); !s.ok()) return Fail(s);
  if (!lead) return 0;
  if (!epochs.evaluated)
    epochs.accuracy = Evaluate(dp->replica(0), data.test_x, data.test_y);  // resumed after the last epoch
  PrintResult(c, devices, processes, *dp, checkpoints.JsonFields(),
              {.accuracy = epochs.accuracy,
               .last_loss = epochs.last_loss,
               .steps = at.step,
               .samples_per_sec = static_cast<double>(epochs.samples) / std::max(epochs.train_seconds, 1e-9)});
  return 0;
}

int Train(TrainConfig c) {
  if (absl::Status s = CheckWatchPaths(c.watch); !s.ok()) throw UsageError{std::string(s.message())};
  std::vector<std::pair<std::string, std::string>> agreed = MathSettings(c);
  for (auto& setting : CheckpointAgreement(c.checkpoints)) agreed.push_back(std::move(setting));
  agreed.emplace_back("--shard", distributed::ShardingName(c.shard));  // not the math: resumable under any
  const Run run = SetUpRun({.devices = c.devices,
                            .threads = c.threads,
                            .collective_timeout_s = c.collective_timeout_s,
                            .checkpoint = c.checkpoint,
                            .flight_recorder_dir = c.flight_recorder_dir},
                           std::move(agreed));
  const std::vector<DispatchDevice>& devices = run.devices;
  const int rank = run.rank, processes = run.processes;
  const int64_t members = static_cast<int64_t>(devices.size()) * processes;
  if (c.batch_size < members) {
    throw UsageError{absl::StrCat("--batch_size=", c.batch_size, " is smaller than the ", members, " devices")};
  }
  CheckMemory(EstimateTrainMemory({.model = c.model,
                                   .batch = c.batch_size,
                                   .train_limit = c.train_limit,
                                   .devices = static_cast<int64_t>(devices.size()),
                                   .members = members,
                                   .shard = c.shard,
                                   .precision = c.precision.precision}));
  // After the memory check: rank 0 reads the checkpoint it chooses.
  CheckpointPlan plan = PlanCheckpoints(c.checkpoints, MathSettings(c), run.group_options.process_group.get(), "train");
  // The list is one backend (validated): train with that backend's tensors.
  const auto trained = distributed::MakeTrainingGroup(devices, run.group_options, [&](auto group) {
    return TrainOn<typename std::decay_t<decltype(*group)>::Inner>(c, group, plan, rank, processes);
  });
  if (!trained.ok()) throw UsageError{std::string(trained.status().message())};
  return *trained;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  return kiln::RunMain(argc, argv, "train", "Trains a model on Fashion-MNIST with kiln.", [] {
    const auto config = kiln::TrainConfigFromFlags();
    if (!config.ok()) throw kiln::UsageError{std::string(config.status().message())};
    return kiln::Train(*config);
  });
}
