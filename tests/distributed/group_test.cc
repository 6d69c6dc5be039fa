// Dispatch devices and device-list validation: every rejection by its exact code and message,
// and the typed group each accepted list unwraps into.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "distributed/group.h"
#include "tests/backend_names.h"
#include "tests/backends.h"

namespace kiln::distributed {
namespace {

using ::kiln::testing::AsSentence;
using ::kiln::testing::CompiledBackendNames;
using ::kiln::testing::ConfigNames;
using ::kiln::testing::DistributedBackends;
using ::kiln::testing::KnownBackendNames;
using ::kiln::testing::MissingBackends;
using ::kiln::testing::TestDevices;

void ExpectRejected(std::vector<DispatchDevice> devices, absl::StatusCode code, const std::string& message) {
  const auto group = MakeGroup(devices, Collective::kAllReduce);
  ASSERT_FALSE(group.ok());
  EXPECT_EQ(group.status().code(), code);
  EXPECT_EQ(group.status().message(), message);
}

// Device strings, which name CPU devices.
class GroupTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cpu::Configure({.devices = 4}).ok()); }
  static DispatchDevice D(const char* text) { return *DispatchDevice::Parse(text); }
  static DispatchDevice A(const char* text) { return DispatchDevice::Autodiff(D(text)); }
};

TEST_F(GroupTest, ParsesAndPrintsDevices) {
  EXPECT_EQ(D("cpu:3").ToString(), "cpu:3");
  EXPECT_EQ(CpuDevice(1).ToString(), "cpu:1");  // what the typed suites' messages are built from
  EXPECT_EQ(A("cpu:1").ToString(), "autodiff(cpu:1)");
  EXPECT_EQ(*DispatchDevice::Parse("autodiff(cpu:1)"), A("cpu:1"));
  EXPECT_EQ(D("cpu:2").backend(), "cpu");
  EXPECT_EQ(A("cpu:2").backend(), "cpu");
  EXPECT_NE(D("cpu:0"), A("cpu:0"));
  const auto list = DispatchDevice::ParseList("cpu:0, cpu:1");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 2u);
}

// A deadline is now + timeout: a timeout that would overflow it is refused up front.
TEST_F(GroupTest, RejectsTimeoutsADeadlineCannotHold) {
  const std::vector<DispatchDevice> devices = {D("cpu:0"), D("cpu:1")};
  for (const auto timeout : {std::chrono::milliseconds(0), std::chrono::milliseconds::max()}) {
    const auto group = MakeGroup(devices, Collective::kAllReduce, {.timeout = timeout});
    EXPECT_EQ(group.status().message(), absl::StrCat("all_reduce: timeout ", timeout.count(),
                                                     " ms must be positive and at most 604800000 ms (a week)"));
  }
  try {
    DeviceGroup<Cpu> direct({CpuDevice(0)}, {.timeout = std::chrono::hours(24 * 365 * 1000)});
    FAIL() << "a group with a deadline past the clock's range was made";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(),
              "device group: timeout 31536000000000 ms must be positive and at most 604800000 ms (a week)");
  }
}

// Code written once per backend gets the typed group; no caller visits the variant by hand.
TEST_F(GroupTest, HandsTheTypedGroupToGenericCode) {
  const auto size = MakeGroup({D("cpu:0"), D("cpu:1")}, Collective::kAllReduce, {}, [](auto group) {
    EXPECT_TRUE((std::is_same_v<std::decay_t<decltype(*group)>, DeviceGroup<Cpu>>));
    return group->size();
  });
  EXPECT_EQ(size.value(), 2);
  const auto refused = MakeGroup({D("cpu:0"), D("cpu:0")}, Collective::kAllReduce, {}, [](auto group) { return 1; });
  EXPECT_EQ(refused.status().message(),
            "all_reduce: device 1 is cpu:0, the same device as device 0; each device may appear once");
  // Training wraps plain devices in autodiff.
  const auto inner = MakeTrainingGroup({D("cpu:0"), A("cpu:1")}, {}, [](auto group) {
    return std::string(std::decay_t<decltype(*group)>::Inner::Name());
  });
  EXPECT_EQ(inner.value(), "cpu");
  EXPECT_TRUE(MakeGroupOf<Cpu>({D("cpu:0")}, Collective::kAllReduce).ok());
  EXPECT_EQ(MakeGroupOf<Autodiff<Cpu>>({D("cpu:0")}, Collective::kAllReduce).status().message(),
            "all_reduce: the devices (cpu:0, ...) make a group of another backend than autodiff_cpu");
}

TEST_F(GroupTest, RejectsDeviceStringsClearly) {
  const std::string compiled = absl::StrJoin(CompiledBackendNames(), ", ");
  // A backend kiln knows but this build lacks is named with the --config that compiles it in.
  for (const KnownBackend& b : MissingBackends()) {
    const auto missing = DispatchDevice::Parse(absl::StrCat(b.name, ":1"));
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(missing.status().message(),
              absl::StrCat("device '", b.name, ":1': this build has no ", b.name,
                           " backend; rebuild with --config=", b.config, " (compiled in: ", compiled, ")"));
  }
#ifdef KILN_WITH_CUDA
  // cuda:0 parses where there is a GPU; elsewhere it names why there is none.
  // Parsing is syntax only; whether cuda:0 exists is asked when a group is made.
  const absl::Status cuda0 = D("cuda:0").Check();
  if (!cuda0.ok()) {
    EXPECT_TRUE(absl::StartsWith(cuda0.message(), "cuda:0 does not exist: no CUDA device is available (")) << cuda0;
  }
#endif
  EXPECT_EQ(DispatchDevice::Parse("gpu:0").status().message(), "device 'gpu:0': unknown backend 'gpu'; kiln knows " +
                                                                   AsSentence(KnownBackendNames()) +
                                                                   " (compiled in: " + compiled + ")");
  EXPECT_EQ(DispatchDevice::Parse("cpu").status().message(),
            "device 'cpu' is not of the form backend:index (e.g. cpu:0)");
  EXPECT_EQ(DispatchDevice::Parse("cpu:-1").status().code(), absl::StatusCode::kInvalidArgument);
  // cpu:7 parses (syntax only); the group it would join is refused.
  ExpectRejected({D("cpu:0"), D("cpu:7")}, absl::StatusCode::kInvalidArgument,
                 "cpu:7 does not exist: this process has 4 logical CPU devices (cpu:0..cpu:3); set "
                 "KILN_CPU_DEVICES or call kiln::cpu::Configure for more");
  EXPECT_EQ(DispatchDevice::Parse("autodiff(cpu:0").status().message(),
            "device 'autodiff(cpu:0': autodiff( has no closing )");
  EXPECT_FALSE(DispatchDevice::ParseList("cpu:0,,cpu:1").ok());
}

#ifdef KILN_WITH_VULKAN
// CPU and Vulkan devices in one list: rejected before any device is touched.
TEST_F(GroupTest, RejectsMixedCpuAndVulkanLists) {
  KILN_SKIP_IF_UNAVAILABLE(Vulkan);
  ASSERT_TRUE(vulkan::Configure({.virtual_devices = 2}).ok());
  EXPECT_EQ(D("vulkan:1").ToString(), "vulkan:1");
  EXPECT_EQ(D("vulkan:1").backend(), "vulkan");
  EXPECT_EQ(D("vulkan:9").Check().message(),
            "vulkan:9 does not exist: this process has 2 Vulkan devices (vulkan:0..vulkan:1); set "
            "KILN_VULKAN_VIRTUAL_DEVICES or call kiln::vulkan::Configure for more");
  const std::vector<DispatchDevice> mixed = {D("cpu:0"), D("vulkan:0")};
  const absl::Status s = ValidateDevices(mixed, Collective::kAllReduce);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "all_reduce: device 1 is vulkan:0 (vulkan) but device 0 is cpu:0 (cpu); a "
            "group's devices share one backend");
  const std::vector<DispatchDevice> mixed_autodiff = {A("vulkan:0"), A("cpu:1")};
  EXPECT_EQ(MakeGroup(mixed_autodiff, Collective::kGradientSync).status().message(),
            "gradient sync: device 1 is autodiff(cpu:1) (cpu) but device 0 is autodiff(vulkan:0) "
            "(vulkan); a group's devices share one backend");
}
#endif

// Lists of one backend's devices: rejections whose messages name the devices, and the typed
// group an accepted list unwraps into.
template <class B>
class Groups : public ::testing::Test {
 protected:
  void SetUp() override {
    KILN_SKIP_IF_UNAVAILABLE(B);
    KILN_SKIP_IF_FEWER_DEVICES(B, ::kiln::testing::kDistributedDevices);
  }
  using Device = typename B::Device;
  static DispatchDevice D(const Device& d) { return DispatchDevice(d); }
  static DispatchDevice A(const Device& d) { return DispatchDevice::Autodiff(DispatchDevice(d)); }
  // The expected printing of A(d): spelled out rather than taken from DispatchDevice::ToString.
  static std::string AName(const Device& d) { return absl::StrCat("autodiff(", d.ToString(), ")"); }
};
TYPED_TEST_SUITE(Groups, DistributedBackends, ConfigNames);

TYPED_TEST(Groups, RejectsEveryBadList) {
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto d = TestDevices<TypeParam>::Provide(2);
  const std::string d0 = d[0].ToString(), d1 = d[1].ToString();
  ExpectRejected({}, kInvalid, "all_reduce: the device list is empty; give at least one device");
  ExpectRejected(
      {this->D(d[0]), this->D(d[1]), this->D(d[0])}, kInvalid,
      absl::StrCat("all_reduce: device 2 is ", d0, ", the same device as device 0; each device may appear once"));
  ExpectRejected({this->D(d[0]), this->A(d[1])}, kInvalid,
                 absl::StrCat("all_reduce: device 1 is ", this->AName(d[1]), " but device 0 is ", d0,
                              "; a group's devices are all autodiff or none"));
  ExpectRejected({this->A(d[0]), this->D(d[1])}, kInvalid,
                 absl::StrCat("all_reduce: device 1 is ", d1, " but device 0 is ", this->AName(d[0]),
                              "; a group's devices are all autodiff or none"));
  ExpectRejected({this->A(d[0]), DispatchDevice::Autodiff(this->A(d[1]))}, kInvalid,
                 absl::StrCat("all_reduce: device 1 is autodiff(", this->AName(d[1]),
                              "), autodiff inside autodiff; wrap a device in autodiff once"));
  ExpectRejected({this->A(d[0]), this->A(d[0])}, kInvalid,
                 absl::StrCat("all_reduce: device 1 is ", this->AName(d[0]),
                              ", the same device as device 0; each device may appear once"));
}

TYPED_TEST(Groups, UnwrapsIntoTheTypedGroup) {
  using B = TypeParam;
  const auto d = TestDevices<B>::Provide(3);
  const auto plain = MakeGroup({this->D(d[0]), this->D(d[1])}, Collective::kAllReduce);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<DeviceGroup<B>>>(*plain));
  EXPECT_EQ(std::get<std::shared_ptr<DeviceGroup<B>>>(*plain)->devices(),
            (std::vector<typename B::Device>{d[0], d[1]}));
  const auto ad = MakeGroup({this->A(d[2]), this->A(d[0])}, Collective::kGradientSync);
  ASSERT_TRUE(ad.ok()) << ad.status();
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<DeviceGroup<Autodiff<B>>>>(*ad));
  EXPECT_EQ(std::get<std::shared_ptr<DeviceGroup<Autodiff<B>>>>(*ad)->devices(),
            (std::vector<typename B::Device>{d[2], d[0]}));
  // One visit reaches code written once per backend.
  const int size = std::visit([](const auto& g) { return g->size(); }, *ad);
  EXPECT_EQ(size, 2);
}

}  // namespace
}  // namespace kiln::distributed
