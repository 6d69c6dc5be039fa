// The main job: trains an MLP or a small CNN on Fashion-MNIST, evaluates on the 10,000 test
// images after every epoch, and prints one JSON line with the result as its last output.
//
//   ./bazelw run //examples:train -- --model=mlp --epochs=10
//
// Under a launcher (tools/launch, srun, mpirun; see distributed/launch_env.h) every process
// trains data-parallel over its --devices and joins the others through a Gloo process group:
// the global batch is split over every device of every process. CPU and Vulkan tensors cross
// processes through Gloo; CUDA tensors through one NCCL communicator over every GPU, the Gloo
// group carrying only its set-up and checks. A GPU belongs to one process: with
// --devices=cuda:0,cuda:1 the process with local rank l trains on GPUs 2l and 2l + 1. Rank 0 evaluates, prints and
// writes the checkpoint (the others wait for it at their next collective).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/dispatch/dispatch_backend.h"
#include "data/idx.h"
#include "distributed/data_parallel.h"
#include "distributed/gloo_process_group.h"
#include "distributed/group.h"
#include "distributed/launch_env.h"
#include "examples/progress.h"
#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/conv.h"
#include "nn/linear.h"
#include "nn/loss.h"
#include "nn/optim.h"
#include "nn/sequential.h"

ABSL_FLAG(std::string, model, "mlp", "mlp (784-256-256-10) or cnn (two conv layers)");
ABSL_FLAG(int, epochs, 0, "passes over the training set (0: 10 for mlp, 4 for cnn)");
ABSL_FLAG(int, batch_size, 64, "images per step");
ABSL_FLAG(double, lr, 0, "learning rate (0: 0.05 for sgd, 0.001 for adamw)");
ABSL_FLAG(std::string, optimizer, "", "sgd (momentum 0.9) or adamw (default: sgd for mlp, adamw for cnn)");
ABSL_FLAG(double, weight_decay, 0, "weight decay");
ABSL_FLAG(uint64_t, seed, 1, "seed for initialisation, shuffling and dropout");
ABSL_FLAG(std::string, data_dir, kiln::data::kFashionMnistDir, "folder with the *-idx?-ubyte.gz files");
ABSL_FLAG(std::string, devices, "cpu:0", "devices to train on, data-parallel (e.g. cpu:0,cpu:1)");
ABSL_FLAG(int, threads, 0, "threads per device (0: the cores shared fairly)");
ABSL_FLAG(std::string, checkpoint, "", "safetensors file written after every epoch");
ABSL_FLAG(int, train_limit, 0, "use only the first N training images (0: all)");
ABSL_FLAG(bool, cosine, true, "cosine learning-rate decay over the run");
ABSL_FLAG(double, collective_timeout, 60,
          "seconds a collective (and the rendezvous) may wait for the other devices and processes");

namespace kiln {
namespace {

struct UsageError {
  std::string message;
};

// Abseil exits with status 1 on an unknown flag or a bad value; kiln's programs promise 2
// with a message, so every --flag is checked before Abseil parses them.
void CheckFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) throw UsageError{absl::StrCat("unexpected argument '", arg, "'")};
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    std::string name = arg.substr(0, eq);
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && name.rfind("no", 0) == 0) flag = absl::FindCommandLineFlag(name.substr(2));
    if (flag == nullptr) {
      if (name == "help" || name == "helpfull") continue;
      throw UsageError{absl::StrCat("unknown flag --", name, "; see --help")};
    }
    if (eq == std::string::npos) continue;  // a bool, or a value in the next argument
    std::string error;
    if (!const_cast<absl::CommandLineFlag*>(flag)->ParseFrom(arg.substr(eq + 1), &error)) {
      throw UsageError{absl::StrCat("--", arg, ": ", error)};
    }
  }
}

// Under a launcher every process gets the same --devices, but a GPU can serve only one of
// them: the process with local rank l takes the l-th block of GPUs, as wide as the highest
// index listed + 1 (torchrun users pick cuda:LOCAL_RANK by hand for the same reason).
// Returns the spec with the GPUs renumbered.
std::string TakeOwnGpus(const std::string& spec, const distributed::LaunchEnv& launch) {
  std::vector<std::string> parts = absl::StrSplit(spec, ',');
  // part = "autodiff(" x wrappers + "cuda:" + index + ")" x wrappers
  auto gpu_index = [](const std::string& part, size_t* colon, int* index) {
    *colon = part.find("cuda:");
    return *colon != std::string::npos &&
           absl::SimpleAtoi(absl::StripSuffix(part.substr(*colon + 5), std::string(*colon / 9, ')')), index);
  };
  int width = 0;
  for (const std::string& part : parts) {
    size_t colon = 0;
    int index = 0;
    if (gpu_index(part, &colon, &index)) width = std::max(width, index + 1);
  }
  for (std::string& part : parts) {
    size_t colon = 0;
    int index = 0;
    if (!gpu_index(part, &colon, &index)) continue;
    const int own = launch.local_rank * width + index;
#ifdef KILN_WITH_CUDA
    if (absl::Status s = cuda::CheckDevice(CudaDevice(own)); own != index && !s.ok()) {
      throw UsageError{absl::StrCat("--devices=", spec, ": the process with local rank ", launch.local_rank, " of ",
                                    launch.local_world_size, " trains on cuda:", own, " in place of cuda:", index,
                                    " (each takes its own GPUs): ", s.message())};
    }
#endif
    part = absl::StrCat(part.substr(0, colon + 5), own, std::string(colon / 9, ')'));
  }
  return absl::StrJoin(parts, ",");
}

// --devices: logical CPU devices are made to exist first (as many as the highest index
// needs, the cores shared among those listed), then the list is validated as a whole. The
// plain devices come back (training always records gradients, so autodiff(cpu:N) and cpu:N
// mean the same here).
std::vector<DispatchDevice> ParseDevices(const std::string& given, const distributed::LaunchEnv* launch) {
  const int processes_here = launch ? launch->local_world_size : 1;
  const std::string spec = launch ? TakeOwnGpus(given, *launch) : given;
  int highest = 0, listed = 0;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int index = 0;
    while (absl::ConsumePrefix(&part, "autodiff(") && absl::ConsumeSuffix(&part, ")")) {
    }
    if (absl::ConsumePrefix(&part, "cpu:") && absl::SimpleAtoi(part, &index) && index >= 0) {
      highest = std::max(highest, index);
    }
    ++listed;
  }
  const int threads = absl::GetFlag(FLAGS_threads) > 0 ? absl::GetFlag(FLAGS_threads)
                                                        : std::max(1, cpu::HardwareThreads() / (listed * processes_here));
  if (absl::Status s = cpu::Configure({.devices = highest + 1, .threads_per_device = threads}); !s.ok()) {
    throw UsageError{absl::StrCat("--devices=", spec, ": ", s.message())};
  }
  auto devices = DispatchDevice::ParseList(spec);
  if (!devices.ok()) throw UsageError{absl::StrCat("--devices=", spec, ": ", devices.status().message())};
  if (absl::Status s = distributed::ValidateDevices(*devices, distributed::GroupOp::kGradientSync); !s.ok()) {
    throw UsageError{absl::StrCat("--devices=", spec, ": ", s.message())};
  }
  std::vector<DispatchDevice> out;
  for (const DispatchDevice& d : *devices) {
    const auto* wrapped = std::get_if<AutodiffDevice>(&d.variant());
    out.push_back(wrapped ? *wrapped->inner : d);
  }
  return out;
}

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

// Training proper, with backend B's tensors on `devices` (one replica each), one rank of
// `processes` (group_options carries the process group when there are several).
template <Backend B>
int TrainOn(const std::string& kind, int epochs, int batch, const std::string& opt_name, double lr,
            const std::vector<typename B::Device>& devices, const distributed::GroupOptions& group_options,
            int rank, int processes) {
  using AD = Autodiff<B>;
  using T = Tensor<AD>;
  const auto device = devices[0];

  auto train = data::LoadFashionMnist(absl::GetFlag(FLAGS_data_dir), "train");
  if (!train.ok()) throw UsageError{std::string(train.status().message())};
  auto test = data::LoadFashionMnist(absl::GetFlag(FLAGS_data_dir), "t10k");
  if (!test.ok()) throw UsageError{std::string(test.status().message())};

  Tensor<B> train_x = Images<B>(train->images, kind, device);
  Tensor<B> train_y = Tensor<B>::from_data(train->labels, device);
  if (const int limit = absl::GetFlag(FLAGS_train_limit); limit > 0 && limit < train_x.size(0)) {
    train_x = train_x.slice(0, 0, limit);
    train_y = train_y.slice(0, 0, limit);
  }
  const Tensor<B> test_x = Images<B>(test->images, kind, device);
  const Tensor<B> test_y = Tensor<B>::from_data(test->labels, device);

  Generator gen(absl::GetFlag(FLAGS_seed));
  const auto initial = BuildModel<B>(kind, gen, device);
  const double weight_decay = absl::GetFlag(FLAGS_weight_decay);
  auto make_optimizer = [&]() -> std::unique_ptr<nn::Optimizer<B>> {
    if (opt_name == "sgd") {
      return std::make_unique<nn::Sgd<B>>(lr, nn::SgdOptions{.momentum = 0.9, .weight_decay = weight_decay});
    }
    return std::make_unique<nn::AdamW<B>>(lr, nn::AdamWOptions{.weight_decay = weight_decay});
  };
  // One replica per device (one device is the same code with a group of one).
  auto group = std::make_shared<distributed::DeviceGroup<AD>>(devices, group_options);
  auto dp = distributed::DataParallel<B>::Create(*initial, group, make_optimizer);
  if (!dp.ok()) {
    // The first broadcast already crosses processes: a peer that fails there is no usage error.
    if (dp.status().code() != absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "train: %s\n", std::string(dp.status().message()).c_str());
      return 1;
    }
    throw UsageError{std::string(dp.status().message())};
  }
  const bool lead = rank == 0;  // evaluates, prints and writes the checkpoint
  const int64_t members = static_cast<int64_t>(devices.size()) * processes;
  nn::Module<AD>& model = (*dp)->replica(0);
  const auto loss_fn = [](nn::Module<AD>& m, const T& x, const T& y) { return nn::CrossEntropy(m(x), y); };

  const int64_t n = train_x.size(0);
  const int64_t steps_per_epoch = (n + batch - 1) / batch;
  const nn::CosineSchedule schedule{.base_lr = lr, .total_steps = steps_per_epoch * epochs, .min_lr = lr * 0.01};
  Progress progress(lead && isatty(STDOUT_FILENO), steps_per_epoch, epochs);
  double last_loss = 0, accuracy = 0, train_seconds = 0;
  int64_t step = 0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const Tensor<B> order = Shuffle<B>(n, gen, device);
    const auto start = std::chrono::steady_clock::now();
    double loss_sum = 0;
    for (int64_t b = 0; b < steps_per_epoch; ++b, ++step) {
      if (absl::GetFlag(FLAGS_cosine)) {
        for (int r = 0; r < (*dp)->size(); ++r) (*dp)->optimizer(r).set_lr(schedule(step));
      }
      const Tensor<B> idx = order.slice(0, b * batch, std::min(n, (b + 1) * batch));
      if (idx.size(0) < members) continue;  // a last batch too small to split
      const absl::StatusOr<double> loss = (*dp)->Step(train_x.index_select(0, idx), train_y.index_select(0, idx), loss_fn);
      if (!loss.ok()) {
        std::fprintf(stderr, "train: %s\n", std::string(loss.status().message()).c_str());
        return 1;
      }
      last_loss = *loss;
      loss_sum += last_loss;
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (lead) progress.Step(epoch, b + 1, loss_sum / (b + 1), std::min(n, (b + 1) * batch) / std::max(seconds, 1e-9));
    }
    train_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    last_loss = loss_sum / steps_per_epoch;
    if (!lead) continue;
    accuracy = Evaluate(model, test_x, test_y);
    progress.EndEpoch(epoch, last_loss, accuracy);
    if (const std::string path = absl::GetFlag(FLAGS_checkpoint); !path.empty()) {
      if (absl::Status s = nn::SaveCheckpoint(path, model, &(*dp)->optimizer(0)); !s.ok()) {
        std::fprintf(stderr, "train: %s\n", std::string(s.message()).c_str());
        return 1;
      }
    }
  }
  if (!lead) return 0;
  std::vector<std::string> names;
  for (const auto& d : devices) names.push_back(absl::StrCat("\"", d.ToString(), "\""));
  std::printf("{\"test_accuracy\":%.4f,\"train_loss\":%.4f,\"epochs\":%d,\"steps\":%lld,"
              "\"samples_per_sec\":%.1f,\"devices\":[%s]%s}\n",
              accuracy, last_loss, epochs, static_cast<long long>(step),
              static_cast<double>(n) * epochs / std::max(train_seconds, 1e-9), absl::StrJoin(names, ",").c_str(),
              processes > 1 ? absl::StrCat(",\"processes\":", processes).c_str() : "");
  return 0;
}

int Train() {
  const std::string kind = absl::GetFlag(FLAGS_model);
  if (kind != "mlp" && kind != "cnn") throw UsageError{absl::StrCat("--model=", kind, ": expected mlp or cnn")};
  const int epochs = absl::GetFlag(FLAGS_epochs) > 0 ? absl::GetFlag(FLAGS_epochs) : (kind == "mlp" ? 10 : 4);
  const int batch = absl::GetFlag(FLAGS_batch_size);
  const std::string opt_name = !absl::GetFlag(FLAGS_optimizer).empty() ? absl::GetFlag(FLAGS_optimizer)
                               : kind == "mlp" ? "sgd" : "adamw";
  if (opt_name != "sgd" && opt_name != "adamw") {
    throw UsageError{absl::StrCat("--optimizer=", opt_name, ": expected sgd or adamw")};
  }
  const double lr = absl::GetFlag(FLAGS_lr) > 0 ? absl::GetFlag(FLAGS_lr) : (opt_name == "sgd" ? 0.05 : 0.001);
  if (batch < 1 || absl::GetFlag(FLAGS_epochs) < 0 || absl::GetFlag(FLAGS_lr) < 0 ||
      absl::GetFlag(FLAGS_train_limit) < 0 || absl::GetFlag(FLAGS_threads) < 0) {
    throw UsageError{"--batch_size must be >= 1; --epochs, --lr, --train_limit, --threads >= 0"};
  }
  // A launcher's environment makes this process one rank of several.
  const auto launch = distributed::ReadLaunchEnv();
  if (!launch.ok()) throw UsageError{std::string(launch.status().message())};
  const std::vector<DispatchDevice> devices =
      ParseDevices(absl::GetFlag(FLAGS_devices), launch->has_value() ? &**launch : nullptr);
  const double timeout_s = absl::GetFlag(FLAGS_collective_timeout);
  if (!(timeout_s > 0)) throw UsageError{"--collective_timeout must be > 0"};
  distributed::GroupOptions group_options{
      .timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))};
  int rank = 0, processes = 1;
  if (launch->has_value()) {
    auto world = distributed::GlooProcessGroup::Connect(
        distributed::ProcessGroupOptions::From(**launch, group_options.timeout));
    if (!world.ok()) {
      std::fprintf(stderr, "train: %s\n", std::string(world.status().message()).c_str());
      return 1;
    }
    group_options.process_group = *world;
    rank = (*world)->rank();
    processes = (*world)->world_size();
  }
  const int64_t members = static_cast<int64_t>(devices.size()) * processes;
  if (batch < members) {
    throw UsageError{absl::StrCat("--batch_size=", batch, " is smaller than the ", members, " devices")};
  }
  // The list is one backend (validated): train with that backend's tensors.
  return std::visit([&](const auto& first) -> int {
    using D = std::decay_t<decltype(first)>;
    if constexpr (std::is_same_v<D, AutodiffDevice>) {
      throw UsageError{"internal: an autodiff device survived ParseDevices"};
    } else {
      std::vector<D> typed;
      for (const DispatchDevice& d : devices) typed.push_back(std::get<D>(d.variant()));
      return TrainOn<typename BackendOfDevice<D>::type>(kind, epochs, batch, opt_name, lr, typed, group_options,
                                                        rank, processes);
    }
  }, devices[0].variant());
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Trains a model on Fashion-MNIST with kiln.");
  try {
    kiln::CheckFlags(argc, argv);
    absl::ParseCommandLine(argc, argv);
    return kiln::Train();
  } catch (const kiln::UsageError& e) {
    std::fprintf(stderr, "train: %s\n", e.message.c_str());
    return 2;
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "train: %s\n", e.what());
    return 2;
  }
}
