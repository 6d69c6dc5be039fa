// Tensor<Dispatch>: a backend picked at run time from a device string. (The conformance suite
// runs on it too; this covers what is particular to it.)
#include <gtest/gtest.h>

#include "autodiff/autodiff.h"
#include "backends/dispatch/dispatch_backend.h"

namespace kiln {
namespace {

using T = Tensor<Dispatch>;

// Autodiff<Dispatch> records every op of tensor/op_table.h, with its exact signature.
static_assert(RecordsEveryOp<Dispatch>());

TEST(Dispatch, RunsOnTheDeviceAStringNames) {
  ASSERT_TRUE(cpu::Configure({.devices = 2}).ok());
  const DispatchDevice device = DispatchDevice::Parse("cpu:1").value();
  const T x = T::arange(0, 4, 1, DType::kF32, device);
  EXPECT_EQ(x.device(), device);
  EXPECT_EQ(x.Describe(), "f32[4] on cpu:1");
  EXPECT_EQ((x * 2).sum().item<double>(), 12);
  EXPECT_EQ(x.to(DispatchDevice(CpuDevice(0))).device().ToString(), "cpu:0");
  // Gradients through Autodiff<Dispatch>, like any backend.
  using AD = Tensor<Autodiff<Dispatch>>;
  const AD w = AD::ones({3}, DType::kF32, device).require_grad();
  EXPECT_EQ(w.pow(2).sum().backward().get(w)->to_data().ToDoubles(), (std::vector<double>{2, 2, 2}));
}

// Parsing is syntax only: a device that does not exist is refused when a tensor is made on it.
TEST(Dispatch, ATensorOnAMissingDeviceIsAnError) {
  ASSERT_TRUE(cpu::Configure({.devices = 2}).ok());
  const DispatchDevice missing = DispatchDevice::Parse("cpu:7").value();
  try {
    (void)T::zeros({2}, DType::kF32, missing);
    FAIL() << "a tensor was made on cpu:7";
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(),
              "cpu:7 does not exist: this process has 2 logical CPU devices (cpu:0..cpu:1); set KILN_CPU_DEVICES or "
              "call kiln::cpu::Configure for more");
  }
}

TEST(Dispatch, AnAutodiffDeviceIsTheWrongTool) {
  try {
    (void)T::zeros({2}, DType::kF32, DispatchDevice::Parse("autodiff(cpu:0)").value());
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(),
              "autodiff(cpu:0) is an autodiff device; Tensor<Dispatch> takes plain devices (for "
              "gradients use Tensor<Autodiff<Dispatch>> on cpu:0)");
  }
}

}  // namespace
}  // namespace kiln
