// Dispatch devices and device-list validation: every rejection by its exact code and message,
// and the typed group each accepted list unwraps into.
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "distributed/group.h"

namespace kiln::distributed {
namespace {

class GroupTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cpu::Configure({.devices = 4}).ok()); }
  static DispatchDevice D(const char* text) { return *DispatchDevice::Parse(text); }
  static DispatchDevice A(const char* text) { return DispatchDevice::Autodiff(D(text)); }
  static void ExpectRejected(std::vector<DispatchDevice> devices, absl::StatusCode code,
                             const std::string& message) {
    const auto group = MakeGroup(devices, GroupOp::kAllReduce);
    ASSERT_FALSE(group.ok());
    EXPECT_EQ(group.status().code(), code);
    EXPECT_EQ(group.status().message(), message);
  }
};

TEST_F(GroupTest, ParsesAndPrintsDevices) {
  EXPECT_EQ(D("cpu:3").ToString(), "cpu:3");
  EXPECT_EQ(A("cpu:1").ToString(), "autodiff(cpu:1)");
  EXPECT_EQ(*DispatchDevice::Parse("autodiff(cpu:1)"), A("cpu:1"));
  EXPECT_EQ(D("cpu:2").backend(), "cpu");
  EXPECT_EQ(A("cpu:2").backend(), "cpu");
  EXPECT_NE(D("cpu:0"), A("cpu:0"));
  const auto list = DispatchDevice::ParseList("cpu:0, cpu:1");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 2u);
}

TEST_F(GroupTest, RejectsDeviceStringsClearly) {
  const auto vulkan = DispatchDevice::Parse("vulkan:1");
  EXPECT_EQ(vulkan.status().code(), absl::StatusCode::kFailedPrecondition);
#ifdef KILN_WITH_CUDA
  const std::string compiled = "cpu, cuda";
  // cuda:0 parses where there is a GPU; elsewhere it names why there is none.
  const auto cuda0 = DispatchDevice::Parse("cuda:0");
  if (!cuda0.ok()) {
    EXPECT_TRUE(absl::StartsWith(cuda0.status().message(),
                                 "cuda:0 does not exist: no CUDA device is available ("))
        << cuda0.status();
  }
#else
  const std::string compiled = "cpu";
  EXPECT_EQ(DispatchDevice::Parse("cuda:0").status().message(),
            "device 'cuda:0': this build has no cuda backend; rebuild with --config=cuda (compiled in: cpu)");
#endif
  EXPECT_EQ(vulkan.status().message(),
            "device 'vulkan:1': this build has no vulkan backend; rebuild with --config=vulkan "
            "(compiled in: " + compiled + ")");
  EXPECT_EQ(DispatchDevice::Parse("gpu:0").status().message(),
            "device 'gpu:0': unknown backend 'gpu'; kiln knows cpu, vulkan and cuda (compiled in: " +
                compiled + ")");
  EXPECT_EQ(DispatchDevice::Parse("cpu").status().message(),
            "device 'cpu' is not of the form backend:index (e.g. cpu:0)");
  EXPECT_EQ(DispatchDevice::Parse("cpu:-1").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DispatchDevice::Parse("cpu:7").status().message(),
            "cpu:7 does not exist: this process has 4 logical CPU devices (cpu:0..cpu:3); set "
            "KILN_CPU_DEVICES or call kiln::cpu::Configure for more");
  EXPECT_EQ(DispatchDevice::Parse("autodiff(cpu:0").status().message(),
            "device 'autodiff(cpu:0': autodiff( has no closing )");
  EXPECT_FALSE(DispatchDevice::ParseList("cpu:0,,cpu:1").ok());
}

TEST_F(GroupTest, RejectsEveryBadList) {
  constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
  ExpectRejected({}, kInvalid, "all_reduce: the device list is empty; give at least one device");
  ExpectRejected({D("cpu:0"), D("cpu:1"), D("cpu:0")}, kInvalid,
                 "all_reduce: device 2 is cpu:0, the same device as device 0; each device may appear once");
  ExpectRejected({D("cpu:0"), A("cpu:1")}, kInvalid,
                 "all_reduce: device 1 is autodiff(cpu:1) but device 0 is cpu:0; a group's devices "
                 "are all autodiff or none");
  ExpectRejected({A("cpu:0"), D("cpu:1")}, kInvalid,
                 "all_reduce: device 1 is cpu:1 but device 0 is autodiff(cpu:0); a group's devices "
                 "are all autodiff or none");
  ExpectRejected({A("cpu:0"), DispatchDevice::Autodiff(A("cpu:1"))}, kInvalid,
                 "all_reduce: device 1 is autodiff(autodiff(cpu:1)), autodiff inside autodiff; wrap "
                 "a device in autodiff once");
  ExpectRejected({A("cpu:0"), A("cpu:0")}, kInvalid,
                 "all_reduce: device 1 is autodiff(cpu:0), the same device as device 0; each device "
                 "may appear once");
}

TEST_F(GroupTest, UnwrapsIntoTheTypedGroup) {
  const auto plain = MakeGroup({D("cpu:0"), D("cpu:1")}, GroupOp::kAllReduce);
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<DeviceGroup<Cpu>>>(*plain));
  EXPECT_EQ(std::get<std::shared_ptr<DeviceGroup<Cpu>>>(*plain)->devices(),
            (std::vector<CpuDevice>{CpuDevice(0), CpuDevice(1)}));
  const auto ad = MakeGroup({A("cpu:2"), A("cpu:0")}, GroupOp::kGradientSync);
  ASSERT_TRUE(ad.ok());
  ASSERT_TRUE(std::holds_alternative<std::shared_ptr<DeviceGroup<Autodiff<Cpu>>>>(*ad));
  // One visit reaches code written once per backend.
  const int size = std::visit([](const auto& g) { return g->size(); }, *ad);
  EXPECT_EQ(size, 2);
}

}  // namespace
}  // namespace kiln::distributed
