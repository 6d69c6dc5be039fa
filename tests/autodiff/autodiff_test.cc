// Autodiff's behaviour beyond single-op derivatives: accumulation, detach and no-grad, errors,
// leaf hooks and their timing, and that a graph is freed as backward runs.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "autodiff/autodiff.h"
#include "backends/cpu/cpu_backend.h"

namespace kiln {
namespace {

using AD = Tensor<Autodiff<Cpu>>;

// Autodiff records every op of tensor/op_table.h, with its exact signature.
static_assert(RecordsEveryOp<Cpu>());

std::vector<double> V(const Tensor<Cpu>& t) { return t.to_data().ToDoubles(); }

TEST(Autodiff, GradientsAccumulateOverEveryUse) {
  const AD x = AD::from_vector(std::vector<double>{1, 2, 3}, {3}).require_grad();
  const auto grads = (x * x + x + x.exp().log()).sum().backward();  // 2x + 2
  EXPECT_EQ(V(*grads.get(x)), (std::vector<double>{4, 6, 8}));
  EXPECT_EQ(grads.size(), 1);
}

TEST(Autodiff, SeedGradientForNonScalarOutputs) {
  const AD x = AD::from_vector(std::vector<double>{1, 2}, {2}).require_grad();
  const auto seed = Tensor<Cpu>::from_vector(std::vector<double>{10, 100}, {2});
  const auto grads = (x * 3).backward(seed);
  EXPECT_EQ(V(*grads.get(x)), (std::vector<double>{30, 300}));
}

TEST(Autodiff, DetachAndNoGradStopGradients) {
  const AD x = AD::from_vector(std::vector<double>{1, 2}, {2}).require_grad();
  const AD y = x * x.detach();  // d/dx = x (the detached factor is a constant)
  EXPECT_EQ(V(*y.sum().backward().get(x)), (std::vector<double>{1, 2}));
  {
    NoGradScope no_grad;
    EXPECT_FALSE(GradEnabled());
    EXPECT_FALSE((x * 2).requires_grad());
  }
  EXPECT_TRUE(GradEnabled());
  EXPECT_TRUE((x * 2).requires_grad());
  const AD c = AD::ones({2}, DType::kF64);
  EXPECT_FALSE((c * 2).requires_grad());
  EXPECT_FALSE(x.sum().backward().get(c).has_value());
  EXPECT_EQ(c.sum().backward().size(), 0);  // nothing requires a gradient
}

TEST(Autodiff, GradientsFollowTensorsAcrossDevices) {
  ASSERT_TRUE(cpu::Configure({.devices = 2}).ok());
  const AD x = AD::from_vector(std::vector<double>{1, 2}, {2}).require_grad();
  const auto grads = (x.to(CpuDevice(1)) * 3).sum().backward();
  const Tensor<Cpu> g = *grads.get(x);
  EXPECT_EQ(g.device(), CpuDevice(0));
  EXPECT_EQ(V(g), (std::vector<double>{3, 3}));
}

TEST(Autodiff, InnerValuesAreTheWrappedBackendsTensors) {
  const Tensor<Cpu> raw = Tensor<Cpu>::arange(0, 3, 1, DType::kF64);
  const AD x = AD::from_inner(raw).require_grad();
  EXPECT_EQ(V(x.inner()), V(raw));
  EXPECT_EQ(V((x.argmax()).inner().to(DType::kF64)), (std::vector<double>{2}));
}

TEST(Autodiff, ErrorsNameTheProblem) {
  const AD x = AD::from_vector(std::vector<double>{1, 2}, {2}).require_grad();
  try {
    (void)(x * 2).backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(),
              "backward: needs a single-element tensor, got f64[2]; pass a seed gradient of the "
              "same shape instead");
  }
  const AD loss = (x * x).sum();
  (void)loss.backward();
  try {
    (void)loss.backward();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(),
              "backward: this graph was already used by a backward pass (kiln frees a graph as "
              "it goes); run the forward pass again");
  }
  try {
    (void)AD::arange(3).require_grad();
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.status().message(), "require_grad: only floating tensors have gradients, got i64[3]");
  }
  EXPECT_THROW((void)(x * 2).with_value(x.inner()), Error);  // not a leaf
}

// The hook of a parameter fires once, with the full gradient, as soon as every use of the
// parameter has been differentiated: the last layer's first, while earlier layers' nodes are
// still alive, and always before backward returns.
TEST(Autodiff, HooksFireTheMomentAGradientIsFinal) {
  Generator gen(5);
  const AD x = AD::uniform({4, 3}, -1, 1, gen, DType::kF64);
  std::vector<AD> w;
  for (int i = 0; i < 3; ++i) w.push_back(AD::uniform({3, 3}, -1, 1, gen, DType::kF64).require_grad());
  struct Fired {
    int layer;
    int64_t live_nodes;
    std::vector<double> grad;
  };
  std::vector<Fired> fired;
  bool returned = false;
  for (int i = 0; i < 3; ++i) {
    w[i].register_hook([&, i](const Tensor<Cpu>& g) {
      EXPECT_FALSE(returned);
      fired.push_back({i, autodiff::LiveNodes().load(), V(g)});
    });
  }
  // Layer 1's weight is used twice (shared), once early and once late. Only the loss is kept,
  // so a node lives exactly as long as the graph needs it.
  const AD loss = [&] {
    const AD h0 = x.matmul(w[0]).relu();
    const AD h1 = h0.matmul(w[1]).tanh();
    return (h1.matmul(w[2]) + h1.matmul(w[1])).sum();
  }();
  const auto grads = loss.backward();
  returned = true;
  ASSERT_EQ(fired.size(), 3u);
  EXPECT_EQ(fired[0].layer, 2);
  EXPECT_EQ(fired[1].layer, 1);  // after both of its uses, before layer 0
  EXPECT_EQ(fired[2].layer, 0);
  EXPECT_GT(fired[0].live_nodes, fired[2].live_nodes);  // earlier nodes not yet freed
  for (const Fired& f : fired) EXPECT_EQ(f.grad, V(*grads.get(w[f.layer])));
}

TEST(Autodiff, WithValueKeepsTheLeafAndItsHooks) {
  AD w = AD::ones({2}, DType::kF64).require_grad();
  int calls = 0;
  w.register_hook([&](const Tensor<Cpu>&) { ++calls; });
  for (int step = 0; step < 3; ++step) {
    const auto grads = (w * w).sum().backward();
    const Tensor<Cpu> g = *grads.get(w);
    EXPECT_EQ(V(g), V(w.inner() * 2));
    w = w.with_value(w.inner() - 0.25 * g);  // SGD on x^2
  }
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(V(w.inner()), (std::vector<double>{0.125, 0.125}));  // 1 * 0.5^3
}

int64_t ResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stoll(line.substr(6));
  }
  return 0;
}

// 10,000 training steps of a small MLP: no graph node outlives its step, and memory stays flat.
TEST(Autodiff, NoGrowthOverTenThousandSteps) {
  Generator gen(7);
  const AD x = AD::uniform({16, 8}, -1, 1, gen);
  const AD y = AD::uniform({16, 1}, -1, 1, gen);
  AD w1 = AD::uniform({8, 16}, -0.5, 0.5, gen).require_grad();
  AD w2 = AD::uniform({16, 1}, -0.5, 0.5, gen).require_grad();
  const int64_t base_nodes = autodiff::LiveNodes().load();
  int64_t rss_at_1000 = 0;
  double first_loss = 0, loss = 0;
  for (int step = 0; step < 10000; ++step) {
    {
      const AD diff = (x.matmul(w1).relu().matmul(w2) - y);
      const AD l = (diff * diff).mean();
      loss = l.item<double>();
      if (step == 0) first_loss = loss;
      const auto grads = l.backward();
      w1 = w1.with_value(w1.inner() - 0.05 * *grads.get(w1));
      w2 = w2.with_value(w2.inner() - 0.05 * *grads.get(w2));
    }
    ASSERT_EQ(autodiff::LiveNodes().load(), base_nodes) << "step " << step;
    if (step == 1000) rss_at_1000 = ResidentKiB();
  }
  const int64_t growth = ResidentKiB() - rss_at_1000;
  std::printf("resident memory growth over steps 1000..10000: %lld KiB\n", static_cast<long long>(growth));
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  (void)growth;  // sanitizers hold freed memory in quarantine: only the node count is checked
#else
  EXPECT_LT(growth, 1024);
#endif
  EXPECT_LT(loss, first_loss / 2);  // and it learned
}

}  // namespace
}  // namespace kiln
