// Logical CPU devices cpu:0 .. cpu:N-1 in one process. Each device owns a thread count and a
// thread pool; by default the machine's cores are shared fairly between the devices.
#ifndef KILN_BACKENDS_CPU_CPU_DEVICE_H_
#define KILN_BACKENDS_CPU_CPU_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace kiln {

class CpuDevice {
 public:
  constexpr CpuDevice() = default;
  constexpr explicit CpuDevice(int index) : index_(index) {}
  int index() const { return index_; }
  std::string ToString() const;  // "cpu:0"
  friend bool operator==(const CpuDevice&, const CpuDevice&) = default;

 private:
  int index_ = 0;
};

namespace cpu {

struct Config {
  int devices = 1;             // logical devices cpu:0 .. cpu:devices-1
  int threads_per_device = 0;  // 0: the machine's cores divided fairly (at least 1)
};

// Sets the logical devices. By default there is one device, cpu:0, with every core; the
// environment variables KILN_CPU_DEVICES and KILN_CPU_THREADS set the defaults. Safe to call
// at any time: operations already running keep the threads they started with.
absl::Status Configure(const Config& config);
Config CurrentConfig();
int DeviceCount();
int ThreadsOf(const CpuDevice& device);
int HardwareThreads();

// OK if `device` exists, otherwise InvalidArgument naming the devices that do.
absl::Status CheckDevice(const CpuDevice& device);

// Runs fn(begin, end) over [0, n) in up to ThreadsOf(device) chunks of at least `min_grain`
// items; the calling thread runs one chunk. fn must not throw.
void ParallelFor(const CpuDevice& device, int64_t n, int64_t min_grain, absl::FunctionRef<void(int64_t, int64_t)> fn);

// ParallelFor over the elements of a run, its chunks starting at multiples of 16 elements: with
// 64-byte aligned buffers every chunk starts aligned, so Eigen's vector and scalar paths (whose
// exp, erf and tanh differ in the last bits) take the same elements whatever the thread count.
void ParallelForElements(const CpuDevice& device, int64_t n, int64_t min_grain,
                         absl::FunctionRef<void(int64_t, int64_t)> fn);

}  // namespace cpu
}  // namespace kiln

#endif  // KILN_BACKENDS_CPU_CPU_DEVICE_H_
