// A tour of the tensor API on the CPU backend: softmax regression on synthetic clusters,
// trained with a hand-written gradient (autodiff comes with //autodiff). Prints progress,
// then one JSON line with the result.
#include <chrono>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "backends/cpu/cpu_backend.h"

ABSL_FLAG(int, steps, 200, "gradient steps");
ABSL_FLAG(double, lr, 0.5, "learning rate");
ABSL_FLAG(int, samples, 4096, "training samples");
ABSL_FLAG(int, features, 64, "input features");
ABSL_FLAG(int, classes, 10, "classes");
ABSL_FLAG(uint64_t, seed, 1, "random seed");
ABSL_FLAG(std::string, device, "cpu:0", "device to run on (cpu:N)");
ABSL_FLAG(int, threads, 0, "threads for the device (0: every core)");

namespace kiln {
namespace {

using T = CpuTensor;

int Fail(const std::string& message) {
  std::fprintf(stderr, "demo: %s\n", message.c_str());
  return 2;
}

int Run() {
  const std::string device_flag = absl::GetFlag(FLAGS_device);
  int index = 0;
  if (device_flag.rfind("cpu:", 0) != 0 || !absl::SimpleAtoi(device_flag.substr(4), &index) || index < 0) {
    return Fail("--device must look like cpu:0, got '" + device_flag + "'");
  }
  const int steps = absl::GetFlag(FLAGS_steps), n = absl::GetFlag(FLAGS_samples);
  const int f = absl::GetFlag(FLAGS_features), k = absl::GetFlag(FLAGS_classes);
  if (steps < 0 || n < 1 || f < 1 || k < 2) {
    return Fail("need --steps >= 0, --samples >= 1, --features >= 1, --classes >= 2");
  }
  if (absl::Status s = cpu::Configure({.devices = index + 1, .threads_per_device = absl::GetFlag(FLAGS_threads)});
      !s.ok()) {
    return Fail(std::string(s.message()));
  }
  const CpuDevice device(index);
  Generator gen(absl::GetFlag(FLAGS_seed));

  // Clusters: class c is centred on a random point; samples add unit noise.
  const T centres = T::normal({k, f}, 0, 1, gen, DType::kF32, device);
  const T labels = (T::uniform({n}, 0, k, gen, DType::kF32, device)).to(DType::kI64);
  const T x = centres.index_select(0, labels) + T::normal({n, f}, 0, 4, gen, DType::kF32, device);
  const T y = labels.one_hot(k);

  T w = T::zeros({f, k}, DType::kF32, device);
  T b = T::zeros({k}, DType::kF32, device);
  const double lr = absl::GetFlag(FLAGS_lr);
  const auto start = std::chrono::steady_clock::now();
  double loss = 0;
  for (int step = 0; step <= steps; ++step) {
    const T logits = x.matmul(w) + b;
    loss = -(logits.log_softmax(1) * y).sum({1}).mean().item<double>();
    if (step == steps) break;
    // d(loss)/d(logits) = (softmax - one_hot) / n
    const T g = (logits.softmax(1) - y) / n;
    w = w - lr * x.transpose(0, 1).matmul(g);
    b = b - lr * g.sum({0});
    if (step % 50 == 0) std::printf("step %4d  loss %.4f\n", step, loss);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double accuracy = (x.matmul(w) + b).argmax(1).eq(labels).mean().item<double>();
  std::printf(
      "{\"train_loss\":%.6f,\"train_accuracy\":%.4f,\"steps\":%d,"
      "\"samples_per_sec\":%.0f,\"device\":\"%s\"}\n",
      loss, accuracy, steps, steps * static_cast<double>(n) / std::max(seconds, 1e-9), device.ToString().c_str());
  return 0;
}

}  // namespace
}  // namespace kiln

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Softmax regression on synthetic data with kiln tensors.");
  absl::ParseCommandLine(argc, argv);
  try {
    return kiln::Run();
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "demo: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "demo: out of memory (std::bad_alloc): lower --samples, --features or --classes\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "demo: %s\n", e.what());
    return 1;
  }
}
