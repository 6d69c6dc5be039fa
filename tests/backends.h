// The backends compiled into this build, for typed test suites: a backend in
// backends/registry.h is in every list, with the half-precision configurations where its
// struct says kHalfTypes. Its test devices come from its own enumeration (TestDevices below),
// so a new backend adds nothing here.
#ifndef KILN_TESTS_BACKENDS_H_
#define KILN_TESTS_BACKENDS_H_

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/dispatch/dispatch_backend.h"
#include "backends/registry.h"

namespace kiln::testing {

// A backend paired with the floating type a test runs in.
template <class Backend, class Float>
struct Config {
  using B = Backend;
  using T = Float;
};

// The typed lists, derived from the compiled-in backends (backends/registry.h).
template <class... Ts>
struct TypeList {};
template <class... Lists>
struct Concat;
template <class... Ts>
struct Concat<TypeList<Ts...>> {
  using type = TypeList<Ts...>;
};
template <class... As, class... Bs, class... Rest>
struct Concat<TypeList<As...>, TypeList<Bs...>, Rest...> : Concat<TypeList<As..., Bs...>, Rest...> {};
template <class List>
struct AsGtestTypes;
template <class... Ts>
struct AsGtestTypes<TypeList<Ts...>> {
  using type = ::testing::Types<Ts...>;
};
// The backends whose bf16 and f16 kernels are done (B::kHalfTypes in backends/registry.h);
// their configs add both types, plain and under Autodiff.
template <class B>
constexpr bool HasHalf() {
  if constexpr (RegisteredBackend<B>) {
    return B::kHalfTypes;
  } else {
    return false;  // Dispatch's half configs are listed by hand below
  }
}
template <class B>
inline constexpr bool kHasHalf = HasHalf<B>();
template <class B>
using HalfConfigsOf = std::conditional_t<
    kHasHalf<B>,
    TypeList<Config<B, BFloat16>, Config<B, Float16>, Config<Autodiff<B>, BFloat16>, Config<Autodiff<B>, Float16>>,
    TypeList<>>;

template <class... Bs>
struct Lists {
  // Every backend, plain and wrapped in Autodiff, in f32 and f64 (and bf16 and f16 where
  // kHasHalf): the wrapper must not change a single value. Dispatch runs over the CPU.
  using FloatConfigs = typename AsGtestTypes<typename Concat<
      TypeList<Config<Bs, float>, Config<Bs, double>, Config<Autodiff<Bs>, float>, Config<Autodiff<Bs>, double>>...,
      HalfConfigsOf<Bs>...,
      TypeList<Config<Dispatch, float>, Config<Autodiff<Dispatch>, double>, Config<Dispatch, BFloat16>>>::type>::type;
  using AllBackends =
      typename AsGtestTypes<typename Concat<TypeList<Bs, Autodiff<Bs>>..., TypeList<Dispatch>>::type>::type;
  // The backends gradients are checked on (each is wrapped in Autodiff by the test).
  using InnerBackends = ::testing::Types<Bs..., Dispatch>;
  // The backends tests/distributed runs on, plain (tests wrap them in Autodiff where they
  // need gradients); each needs a TestDevices<B>::Provide.
  using DistributedBackends = ::testing::Types<Bs...>;
};
using FloatConfigs = CompiledBackends::Apply<Lists>::FloatConfigs;
using AllBackends = CompiledBackends::Apply<Lists>::AllBackends;
using InnerBackends = CompiledBackends::Apply<Lists>::InnerBackends;
using DistributedBackends = CompiledBackends::Apply<Lists>::DistributedBackends;

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

// Devices a backend-generic test needs beyond the default one, from the backend's own
// enumeration (backends/registry.h), so a registered backend needs nothing here.
//   Second(), Missing(), MissingMessage(): for the conformance and error suites.
//   Provide(n): makes sure at least n devices of the backend exist and returns the first n,
//     distinct and in index order (the distributed suite's group members); a backend that
//     cannot provide n throws kiln::Error, which fails the test rather than skipping it.
//   Shortage(n): why this machine cannot give n devices ("" when it can): only backends
//     whose devices are hardware (a GPU each) run short; their tests skip then.
template <class B>
struct TestDevices {
  using Device = typename B::Device;
  static absl::Status Available() { return B::Available(); }
  static std::vector<Device> Provide(int n) {
    if constexpr (B::kDeviceOwnsAProcess) {
      // Hardware: the first n, whether or not they exist (fixtures make them before a test
      // can skip on Shortage).
      std::vector<Device> out;
      for (int i = 0; i < n; ++i) out.push_back(Device(i));
      return out;
    } else {
      auto devices = B::EnsureDevices(n);
      ThrowIfError(devices.status());
      return *std::move(devices);
    }
  }
  static std::string Shortage(int n) {
    if constexpr (B::kDeviceOwnsAProcess) {
      const auto devices = B::EnsureDevices(n);
      return devices.ok() ? "" : std::string(devices.status().message());
    } else {
      return "";
    }
  }
  static Device Second() { return Provide(2)[1]; }
  static Device Missing() { return Device(99); }
  static std::string MissingMessage() { return std::string(B::CheckDevice(Missing()).message()); }
};

template <class B>
struct TestDevices<Autodiff<B>> : TestDevices<B> {};

// The backend a test config runs on, Autodiff unwrapped.
template <class B>
struct InnerBackend {
  using type = B;
};
template <class B>
struct InnerBackend<Autodiff<B>> : InnerBackend<B> {};

// Whether a run demands that backend B works here, so that a skip would hide a broken install:
// KILN_REQUIRE_ALL_BACKENDS set demands every compiled-in backend (a GPU machine,
// tools/gpu_check.sh); KILN_REQUIRE_BACKENDS=vulkan,... names some (CI builds CUDA in beside
// Vulkan on a machine without a GPU and demands Vulkan alone).
template <class B>
bool BackendRequired() {
  if (std::getenv("KILN_REQUIRE_ALL_BACKENDS") != nullptr) return true;
  const char* names = std::getenv("KILN_REQUIRE_BACKENDS");
  if (names == nullptr) return false;
  for (absl::string_view name : absl::StrSplit(names, ',')) {
    if (name == InnerBackend<B>::type::Name()) return true;
  }
  return false;
}

// Why backend B cannot run on this machine (no device at all), or OK. Tests skip with that
// reason, unless the run requires B (BackendRequired).
template <class B>
absl::Status BackendStatus() {
  if constexpr (requires { TestDevices<B>::Available(); }) {
    return TestDevices<B>::Available();
  } else {
    return absl::OkStatus();
  }
}

#define KILN_SKIP_IF_UNAVAILABLE(B)                                                              \
  if (const absl::Status kiln_status = ::kiln::testing::BackendStatus<B>(); !kiln_status.ok()) { \
    if (::kiln::testing::BackendRequired<B>()) FAIL() << kiln_status;                            \
    GTEST_SKIP() << B::Name() << " is not available here: " << kiln_status;                      \
  }

// Why this machine cannot give n devices of backend B ("" when it can): only backends whose
// devices are hardware (one GPU per CUDA device) define TestDevices<B>::Shortage.
template <class B>
std::string DeviceShortage(int n) {
  if constexpr (requires { TestDevices<B>::Shortage(n); }) {
    return TestDevices<B>::Shortage(n);
  } else {
    return "";
  }
}

// The most devices a test of tests/distributed asks TestDevices<B>::Provide for.
inline constexpr int kDistributedDevices = 4;

// Skips (always: too few GPUs is not a broken install) when B cannot give n devices.
#define KILN_SKIP_IF_FEWER_DEVICES(B, n)                                                           \
  if (const std::string kiln_short = ::kiln::testing::DeviceShortage<B>(n); !kiln_short.empty()) { \
    GTEST_SKIP() << kiln_short;                                                                    \
  }

template <>
struct TestDevices<Cpu> {
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
  static std::string MissingMessage() {
    return "cpu:99 does not exist: this process has 2 logical CPU devices (cpu:0..cpu:1); set "
           "KILN_CPU_DEVICES or call kiln::cpu::Configure for more";
  }
};

template <>
struct TestDevices<Dispatch> {
  using Device = DispatchDevice;  // Provide: the CPU devices
  static std::vector<Device> Provide(int n) {
    const std::vector<CpuDevice> cpu = TestDevices<Cpu>::Provide(n);
    return std::vector<Device>(cpu.begin(), cpu.end());
  }
  static DispatchDevice Second() { return TestDevices<Cpu>::Second(); }
  static DispatchDevice Missing() { return TestDevices<Cpu>::Missing(); }
  static std::string MissingMessage() { return TestDevices<Cpu>::MissingMessage(); }
};

}  // namespace kiln::testing

#endif  // KILN_TESTS_BACKENDS_H_
