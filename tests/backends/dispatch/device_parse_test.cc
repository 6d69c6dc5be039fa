// DispatchDevice::Parse on hostile strings: every input gets a status naming it, never a crash,
// an overflow or a misleading message.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "backends/dispatch/dispatch_device.h"
#include "tests/backend_names.h"

namespace kiln {
namespace {

using testing::AsSentence;
using testing::CompiledBackendNames;
using testing::KnownBackendNames;

std::string Message(const std::string& text) {
  const auto d = DispatchDevice::Parse(text);
  EXPECT_FALSE(d.ok()) << text;
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << text;
  return std::string(d.status().message());
}

TEST(DeviceParse, DeepNestingIsRefusedWithoutRecursion) {
  std::string text;
  for (int i = 0; i < 1000000; ++i) text += "autodiff(";
  text += "cpu:0";
  text += std::string(1000000, ')');
  EXPECT_EQ(Message(text),
            "device 'autodiff(autodiff(autodiff(autodiff(autodiff(autodiff(autodiff(a...' (10000005 "
            "bytes): autodiff( is nested more than 2 deep; wrap a device in autodiff once");
  // Twice is parsed, so that group validation can say what is wrong with it.
  EXPECT_TRUE(DispatchDevice::Parse("autodiff(autodiff(cpu:0))").ok());
}

TEST(DeviceParse, IndicesAreExactDecimalIntegersInRange) {
  EXPECT_EQ(Message("cpu:2147483647"), "device 'cpu:2147483647': index '2147483647' is out of range (0..1023)");
  EXPECT_EQ(Message("cpu:99999999999999999999"),
            "device 'cpu:99999999999999999999': index '99999999999999999999' is out of range (0..1023)");
  EXPECT_EQ(Message("cpu:1024"), "device 'cpu:1024': index '1024' is out of range (0..1023)");
  // absl::SimpleAtoi alone takes a sign, and white space on either side.
  for (const std::string text : {"cpu:+1", "cpu:-1", "cpu: 1", "cpu:0x1", "cpu:1e2", "cpu:", "cpu:1)"}) {
    EXPECT_EQ(Message(text), "device '" + text + "' is not of the form backend:index (e.g. cpu:0)");
  }
}

TEST(DeviceParse, WhiteSpaceIsNamed) {
  EXPECT_EQ(Message(" cpu:3"), "device ' cpu:3' has white space around it; write it as 'cpu:3'");
  EXPECT_EQ(Message("cpu:0\n"), "device 'cpu:0\\n' has white space around it; write it as 'cpu:0'");
  // In a list, white space around each device is fine.
  ASSERT_TRUE(DispatchDevice::ParseList(" cpu:0 ").ok());
}

TEST(DeviceParse, MessagesEscapeAndShortenWhatTheyQuote) {
  EXPECT_EQ(Message(std::string("gpu\x01\xff:0", 7)),
            "device 'gpu\\x01\\xff:0': unknown backend 'gpu\\x01\\xff'; "
            "kiln knows " +
                AsSentence(KnownBackendNames()) + " (compiled in: " + absl::StrJoin(CompiledBackendNames(), ", ") +
                ")");
  EXPECT_EQ(Message(""), "device '': empty; expected backend:index (e.g. cpu:0)");
  EXPECT_LT(Message(std::string(1 << 20, 'x')).size(), 200u);
}

TEST(DeviceParse, ListsHaveABoundedLength) {
  std::string list = "cpu:0";
  for (int i = 0; i < 2000; ++i) list += ",cpu:0";
  const auto devices = DispatchDevice::ParseList(list);
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::EndsWith(devices.status().message(), "has more than 1024 devices")) << devices.status();
}

}  // namespace
}  // namespace kiln
