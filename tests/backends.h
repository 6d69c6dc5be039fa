// The backends compiled into this build, for typed test suites. A new backend joins the
// conformance suite by being added here (behind its build config).
#ifndef KILN_TESTS_BACKENDS_H_
#define KILN_TESTS_BACKENDS_H_

#include <gtest/gtest.h>

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

// Names typed tests "Cpu_f32" rather than "0".
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
template <class B>
struct TestDevices;

template <class B>
struct TestDevices<Autodiff<B>> : TestDevices<B> {};

template <>
struct TestDevices<Cpu> {
  static std::string SecondMissing() { return ""; }
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
  static std::string SecondMissing() { return ""; }
  static DispatchDevice Second() { return TestDevices<Cpu>::Second(); }
  static DispatchDevice Missing() { return TestDevices<Cpu>::Missing(); }
  static constexpr const char* kMissingMessage =
      "cpu:99 does not exist: this process has 2 logical CPU devices (cpu:0..cpu:1); set "
      "KILN_CPU_DEVICES or call kiln::cpu::Configure for more";
};

#ifdef KILN_WITH_CUDA
template <>
struct TestDevices<Cuda> {
  // Why there is no second device ("" when there is).
  static std::string SecondMissing() {
    const int count = cuda::DeviceCount();
    return count >= 2 ? "" : absl::StrFormat("needs two CUDA devices; this machine has %d", count);
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
