// The backends compiled into this build, for typed test suites. A new backend joins the
// conformance suite by being added here (behind its build config).
#ifndef KILN_TESTS_BACKENDS_H_
#define KILN_TESTS_BACKENDS_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/dispatch/dispatch_backend.h"
#ifdef KILN_WITH_CUDA
#include "absl/strings/str_format.h"
#include "backends/cuda/cuda_backend.h"
#endif

namespace kiln::testing {

// A backend paired with the floating type a test runs in.
template <class Backend, class Float>
struct Config {
  using B = Backend;
  using T = Float;
};

// Every backend, plain and wrapped in Autodiff: the wrapper must not change a single value.
// Backends that need hardware (CUDA) are listed too: their tests skip where it is missing.
using FloatConfigs =
    ::testing::Types<Config<Cpu, float>, Config<Cpu, double>, Config<Autodiff<Cpu>, float>,
                     Config<Autodiff<Cpu>, double>, Config<Dispatch, float>,
#ifdef KILN_WITH_CUDA
                     Config<Cuda, float>, Config<Cuda, double>, Config<Autodiff<Cuda>, float>,
                     Config<Autodiff<Cuda>, double>,
#endif
                     Config<Autodiff<Dispatch>, double>>;
using AllBackends = ::testing::Types<Cpu, Autodiff<Cpu>,
#ifdef KILN_WITH_CUDA
                                     Cuda, Autodiff<Cuda>,
#endif
                                     Dispatch>;
// The backends gradients are checked on (each is wrapped in Autodiff by the test).
using InnerBackends = ::testing::Types<Cpu,
#ifdef KILN_WITH_CUDA
                                       Cuda,
#endif
                                       Dispatch>;

// Why backend B cannot run on this machine, or "" when it can.
template <class B>
struct Availability {
  static std::string Missing() { return ""; }
};
template <class B>
struct Availability<Autodiff<B>> : Availability<B> {};
#ifdef KILN_WITH_CUDA
template <>
struct Availability<Cuda> {
  static std::string Missing() {
    const absl::Status s = cuda::Available();
    return s.ok() ? "" : "no CUDA device: " + std::string(s.message());
  }
};
#endif

// Base of the typed fixtures: a test of a backend this machine cannot run is skipped, saying
// why (e.g. the CUDA tests on a machine without a GPU), never failed.
template <class B>
class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const std::string why = Availability<B>::Missing(); !why.empty()) GTEST_SKIP() << why;
  }
};

template <class B>
struct TestDevices;

// The most devices a test of tests/distributed asks TestDevices<B>::Provide for.
inline constexpr int kDistributedDevices = 4;

// Base of the distributed fixtures: also skips where B has fewer than kDistributedDevices
// devices (CUDA groups need one GPU per member).
template <class B>
class DistributedTest : public BackendTest<B> {
 protected:
  void SetUp() override {
    BackendTest<B>::SetUp();
    if (this->IsSkipped()) return;
    const std::string why = TestDevices<B>::Shortage(kDistributedDevices);
    if (!why.empty()) GTEST_SKIP() << why;
  }
};
// The backends tests/distributed runs on, plain (tests wrap them in Autodiff where they need
// gradients). A backend that specialises distributed::CollectiveKernels joins here, behind
// its build config, together with a TestDevices<B>::Provide.
using DistributedBackends = ::testing::Types<Cpu
#ifdef KILN_WITH_CUDA
                                             , Cuda
#endif
                                             >;

// Names typed tests "cpu_f32" (a Config) or "cpu" (a backend) rather than "0".
struct ConfigNames {
  template <class C>
  static std::string GetName(int) {
    if constexpr (requires { typename C::T; }) {
      return std::string(C::B::Name()) + "_" + DTypeName(DTypeOf<typename C::T>());
    } else {
      return C::Name();
    }
  }
};

// Devices a backend-generic test needs beyond the default one.
//   Second(), Missing(), kMissingMessage: for the conformance and error suites.
//   Provide(n): makes sure at least n devices of the backend exist and returns the first n,
//     distinct and in index order (the distributed suite's group members); a backend that
//     cannot provide n throws kiln::Error, which fails the test rather than skipping it.
template <class B>
struct TestDevices;

template <class B>
struct TestDevices<Autodiff<B>> : TestDevices<B> {};

template <>
struct TestDevices<Cpu> {
  static std::string Shortage(int) { return ""; }
  using Device = CpuDevice;
  // Exactly n logical devices of one thread each, so that members do not share cores.
  static std::vector<Device> Provide(int n) {
    ThrowIfError(cpu::Configure({.devices = n, .threads_per_device = 1}));
    std::vector<Device> out;
    for (int i = 0; i < n; ++i) out.push_back(CpuDevice(i));
    return out;
  }
  // A second device of the same backend (configures two logical CPU devices).
  static CpuDevice Second() {
    ThrowIfError(cpu::Configure({.devices = 2}));
    return CpuDevice(1);
  }
  static CpuDevice Missing() { return CpuDevice(99); }
  static constexpr const char* kMissingMessage =
      "cpu:99 does not exist: this process has 2 logical CPU devices (cpu:0..cpu:1); set "
      "KILN_CPU_DEVICES or call kiln::cpu::Configure for more";
};

template <>
struct TestDevices<Dispatch> {
  static std::string Shortage(int) { return ""; }
  using Device = DispatchDevice;  // Provide: the CPU devices
  static std::vector<Device> Provide(int n) {
    const std::vector<CpuDevice> cpu = TestDevices<Cpu>::Provide(n);
    return std::vector<Device>(cpu.begin(), cpu.end());
  }
  static DispatchDevice Second() { return TestDevices<Cpu>::Second(); }
  static DispatchDevice Missing() { return TestDevices<Cpu>::Missing(); }
  static constexpr const char* kMissingMessage =
      "cpu:99 does not exist: this process has 2 logical CPU devices (cpu:0..cpu:1); set "
      "KILN_CPU_DEVICES or call kiln::cpu::Configure for more";
};

#ifdef KILN_WITH_CUDA
template <>
struct TestDevices<Cuda> {
  using Device = CudaDevice;
  static std::string Shortage(int n) {
    const int count = cuda::DeviceCount();
    return count >= n ? "" : absl::StrFormat("needs %d CUDA devices; this machine has %d", n, count);
  }
  // cuda:0 .. cuda:n-1, unchecked (a fixture skips first where they do not exist).
  static std::vector<Device> Provide(int n) {
    std::vector<Device> out;
    for (int i = 0; i < n; ++i) out.push_back(CudaDevice(i));
    return out;
  }
  static CudaDevice Second() { return CudaDevice(1); }
  static CudaDevice Missing() { return CudaDevice(99); }
  static inline const std::string kMissingMessage = absl::StrFormat(
      "cuda:99 does not exist: this machine has %d CUDA device%s (cuda:0..cuda:%d)",
      cuda::DeviceCount(), cuda::DeviceCount() == 1 ? "" : "s", cuda::DeviceCount() - 1);
};
#endif

}  // namespace kiln::testing

#endif  // KILN_TESTS_BACKENDS_H_
