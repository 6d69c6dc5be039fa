#include "backends/cpu/cpu_device.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "backends/cpu/worker_pool.h"

namespace kiln {

std::string CpuDevice::ToString() const { return absl::StrCat("cpu:", index_); }

namespace cpu {
namespace {

// A device's workers: threads - 1 pool threads, since the caller runs one chunk itself. They
// spin between jobs only while every device's threads together fit the machine's cores.
struct DeviceContext {
  DeviceContext(int threads, bool spin)
      : threads(threads), pool(threads > 1 ? std::make_unique<WorkerPool>(threads - 1, spin) : nullptr) {}
  int threads;
  std::unique_ptr<WorkerPool> pool;
};

// Threads of every device together: far beyond any machine's cores, far below what makes
// thread creation fail (1024 devices x 1024 threads did, with std::system_error).
constexpr int64_t kMaxThreads = 4096;

// A default from the environment; unset or not in 1..1024: `fallback`, with a warning.
int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr) return fallback;
  int parsed = 0;
  if (!absl::SimpleAtoi(value, &parsed) || parsed < 1 || parsed > 1024) {
    std::fprintf(stderr, "kiln: ignoring %s: expected a whole number in 1..1024\n", name);
    return fallback;
  }
  return parsed;
}

class Runtime {
 public:
  Runtime() {
    Config config;
    config.devices = EnvInt("KILN_CPU_DEVICES", 1);
    config.threads_per_device = EnvInt("KILN_CPU_THREADS", 0);
    if (static_cast<int64_t>(config.devices) * Threads(config) > kMaxThreads) config.threads_per_device = 0;
    (void)Apply(config);
  }

  absl::Status Configure(const Config& config) {
    if (config.devices < 1 || config.devices > 1024) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cpu::Configure: devices must be in 1..1024, got %d", config.devices));
    }
    if (config.threads_per_device < 0 || config.threads_per_device > 1024) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "cpu::Configure: threads_per_device must be in 0..1024 (0 = fair share), got %d", config.threads_per_device));
    }
    const int64_t total = static_cast<int64_t>(config.devices) * Threads(config);
    if (total > kMaxThreads) {
      return absl::InvalidArgumentError(
          absl::StrFormat("cpu::Configure: %d devices x %d threads each is %d threads; at most %d in all",
                          config.devices, Threads(config), total, kMaxThreads));
    }
    return Apply(config);
  }

  Config config() const {
    std::shared_lock lock(mu_);
    return config_;
  }

  std::shared_ptr<const DeviceContext> Context(int index) const {
    std::shared_lock lock(mu_);
    if (index < 0 || index >= static_cast<int>(contexts_.size())) return nullptr;
    return contexts_[index];
  }

 private:
  static int Threads(const Config& config) {
    return config.threads_per_device > 0 ? config.threads_per_device : std::max(1, HardwareThreads() / config.devices);
  }

  // The old devices stay if the new ones' threads cannot be made.
  absl::Status Apply(const Config& config) {
    std::vector<std::shared_ptr<const DeviceContext>> contexts;
    const bool spin = static_cast<int64_t>(config.devices) * Threads(config) <= HardwareThreads();
    try {
      for (int i = 0; i < config.devices; ++i)
        contexts.push_back(std::make_shared<const DeviceContext>(Threads(config), spin));
    } catch (const std::system_error& e) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("cpu::Configure: cannot start the threads of %d devices: %s", config.devices, e.what()));
    }
    std::unique_lock lock(mu_);
    config_ = config;
    contexts_.swap(contexts);
    return absl::OkStatus();
  }

  // Every op looks its device up, so this is a plain reader-writer lock (absl::Mutex, as
  // Debian builds it, runs deadlock detection on every acquisition).
  mutable std::shared_mutex mu_;
  Config config_;
  std::vector<std::shared_ptr<const DeviceContext>> contexts_;
};

Runtime& GetRuntime() {
  static Runtime* runtime = new Runtime();  // never destroyed: pools outlive static teardown
  return *runtime;
}

}  // namespace

absl::Status Configure(const Config& config) { return GetRuntime().Configure(config); }
Config CurrentConfig() { return GetRuntime().config(); }
int DeviceCount() { return CurrentConfig().devices; }

int HardwareThreads() { return std::max(1, static_cast<int>(std::thread::hardware_concurrency())); }

int ThreadsOf(const CpuDevice& device) {
  const auto context = GetRuntime().Context(device.index());
  return context ? context->threads : 1;
}

absl::Status CheckDevice(const CpuDevice& device) {
  if (GetRuntime().Context(device.index()) != nullptr) return absl::OkStatus();
  const int count = DeviceCount();
  return absl::InvalidArgumentError(
      absl::StrFormat("%s does not exist: this process has %d logical CPU device%s (cpu:0..cpu:%d); set "
                      "KILN_CPU_DEVICES or call kiln::cpu::Configure for more",
                      device.ToString(), count, count == 1 ? "" : "s", count - 1));
}

void ParallelFor(const CpuDevice& device, int64_t n, int64_t min_grain, absl::FunctionRef<void(int64_t, int64_t)> fn) {
  if (n <= 0) return;
  if (n <= min_grain) {  // one chunk: no need to look at the device's threads
    fn(0, n);
    return;
  }
  const auto context = GetRuntime().Context(device.index());
  const int64_t threads = context ? context->threads : 1;
  const int64_t chunks = std::min(threads, (n + std::max<int64_t>(min_grain, 1) - 1) / std::max<int64_t>(min_grain, 1));
  if (chunks <= 1) {
    fn(0, n);
    return;
  }
  const int64_t per_chunk = (n + chunks - 1) / chunks;
  context->pool->Run(chunks, [&](int64_t c) {
    const int64_t begin = std::min(n, c * per_chunk);
    const int64_t end = std::min(n, begin + per_chunk);
    if (begin < end) fn(begin, end);
  });
}

void ParallelForElements(const CpuDevice& device, int64_t n, int64_t min_grain,
                         absl::FunctionRef<void(int64_t, int64_t)> fn) {
  constexpr int64_t kUnit = 16;
  ParallelFor(device, (n + kUnit - 1) / kUnit, std::max<int64_t>(1, min_grain / kUnit),
              [&](int64_t begin, int64_t end) { fn(begin * kUnit, std::min(end * kUnit, n)); });
}

}  // namespace cpu
}  // namespace kiln
