// Activation checkpointing (nn/recompute.h): gradients bit-identical to the stored run (a
// TransformerBlock and a GPT with dropout, in f32 and under bf16 compute, on every backend),
// finite differences, one graph node per recomputed block, hooks once per parameter, the
// ZeRO-3 callbacks, and unchanged parameter names (checkpoints load either way).
#include "nn/recompute.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/functional.h"
#include "nn/gpt.h"
#include "nn/linear.h"
#include "nn/sequential.h"
#include "nn/transformer_block.h"
#include "tests/autodiff/gradcheck.h"
#include "tests/backends.h"

namespace kiln::nn {
namespace {

using ::kiln::testing::ConfigNames;
using ::kiln::testing::InnerBackends;

// Every parameter's gradient (by name) and the values of the extra tensors, per round.
using Record = std::vector<std::pair<std::string, std::vector<double>>>;

template <class B>
void AppendGrads(Module<Autodiff<B>>& model, const Gradients<B>& grads, const std::string& round, Record& out) {
  for (auto& [name, p] : model.named_parameters()) {
    const auto g = grads.get(*p);
    out.emplace_back(round + name, g.has_value() ? g->to_data().ToDoubles() : std::vector<double>{});
  }
}

// Two rounds of a TransformerBlock with dropout (the second round's masks come from where the
// first left the random streams), recording every gradient.
template <class B>
Record BlockRun(bool recompute, std::optional<DType> compute) {
  using T = Tensor<Autodiff<B>>;
  Generator gen(3);
  TransformerBlock<Autodiff<B>> block(8, 2, gen, {.dropout = 0.25});
  block.set_compute_dtype(compute);
  block.set_recompute(recompute);
  Record out;
  for (int round = 0; round < 2; ++round) {
    Generator data(40 + round);
    const T x = T::normal({2, 5, 8}, 0, 1, data).require_grad();
    const T x2 = T::normal({2, 5, 8}, 0, 1, data).require_grad();
    const T w = T::normal({2, 5, 8}, 0, 1, data);
    // Two forwards before one backward (as gradient accumulation without sync does): each
    // recompute must replay its own masks and leave the streams where the second forward did.
    const T y = block(x), y2 = block(x2);
    const auto grads = (y * w + y2).sum().backward();
    const std::string r = std::to_string(round) + ":";
    out.emplace_back(r + "output", y.to_data().ToDoubles());
    out.emplace_back(r + "input", grads.get(x)->to_data().ToDoubles());
    out.emplace_back(r + "input2", grads.get(x2)->to_data().ToDoubles());
    AppendGrads<B>(block, grads, r, out);
  }
  return out;
}

// The same for a small tied-embedding GPT trained on token ids.
template <class B>
Record GptRun(bool recompute, std::optional<DType> compute) {
  using T = Tensor<Autodiff<B>>;
  Generator gen(5);
  Gpt<Autodiff<B>> gpt({.vocab = 13, .context = 6, .layers = 2, .heads = 2, .width = 8, .dropout = 0.2}, gen);
  gpt.set_compute_dtype(compute);
  gpt.set_recompute(recompute);
  Record out;
  for (int round = 0; round < 2; ++round) {
    Generator data(60 + round);
    const T ids = T::from_inner(Tensor<B>::uniform({3, 6}, 0, 13, data, DType::kF32).to(DType::kI64));
    const T targets = T::from_inner(Tensor<B>::uniform({3, 6}, 0, 13, data, DType::kF32).to(DType::kI64));
    const T logits = gpt(ids);
    const T loss = functional::cross_entropy(ForLoss(logits).reshape({-1, 13}), targets.reshape({-1}));
    const auto grads = loss.backward();
    out.emplace_back(std::to_string(round) + ":loss", loss.to_data().ToDoubles());
    AppendGrads<B>(gpt, grads, std::to_string(round) + ":", out);
  }
  return out;
}

void ExpectBitEqual(const Record& stored, const Record& recomputed) {
  ASSERT_EQ(stored.size(), recomputed.size());
  for (size_t i = 0; i < stored.size(); ++i) {
    ASSERT_EQ(stored[i].first, recomputed[i].first);
    ASSERT_FALSE(stored[i].second.empty()) << stored[i].first << " got no gradient";
    EXPECT_EQ(stored[i].second, recomputed[i].second) << stored[i].first;
  }
}

template <class B>
class RecomputeTest : public ::testing::Test {
 protected:
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(B); }
  // Compute dtypes to try: f32 (none), and bf16 where B has half kernels.
  static std::vector<std::optional<DType>> ComputeDTypes() {
    if constexpr (::kiln::testing::kHasHalf<B>) return {std::nullopt, DType::kBF16};
    return {std::nullopt};
  }
};
TYPED_TEST_SUITE(RecomputeTest, InnerBackends, ConfigNames);

TYPED_TEST(RecomputeTest, TransformerBlockGradientsEqualTheStoredRunBitForBit) {
  for (const auto compute : TestFixture::ComputeDTypes()) {
    SCOPED_TRACE(compute ? DTypeName(*compute) : "f32");
    ExpectBitEqual(BlockRun<TypeParam>(false, compute), BlockRun<TypeParam>(true, compute));
  }
}

TYPED_TEST(RecomputeTest, GptGradientsEqualTheStoredRunBitForBit) {
  for (const auto compute : TestFixture::ComputeDTypes()) {
    SCOPED_TRACE(compute ? DTypeName(*compute) : "f32");
    ExpectBitEqual(GptRun<TypeParam>(false, compute), GptRun<TypeParam>(true, compute));
  }
}

// ---- The CPU alone from here on ----------------------------------------------------------------
using AD = Autodiff<Cpu>;
using T = Tensor<AD>;

std::unique_ptr<Sequential<AD>> SmallMlp(uint64_t seed) {
  Generator gen(seed);
  auto net = std::make_unique<Sequential<AD>>();
  net->add<Linear<AD>>(3, 4, gen, LinearOptions{.dtype = DType::kF64})
      .add<GELU<AD>>()
      .add<Linear<AD>>(4, 2, gen, LinearOptions{.dtype = DType::kF64});
  return net;
}

// d(sum(m(x) * w))/d(every parameter element) by central differences, against backward.
void ExpectParameterGradientsMatchFiniteDifferences(Module<AD>& m, const T& x, const T& w) {
  const auto grads = (m(x) * w).sum().backward();
  auto loss = [&] {
    NoGradScope no_grad;
    return (m(x) * w).sum().item<double>();
  };
  const double eps = 1e-6;
  for (auto& [name, p] : m.named_parameters()) {
    const auto g = grads.get(*p);
    ASSERT_TRUE(g.has_value()) << name;
    const std::vector<double> analytic = g->to_data().ToDoubles();
    const TensorData base = p->to_data();
    for (int64_t j = 0; j < base.numel(); ++j) {
      TensorData moved = base;
      moved.mutable_values<double>()[j] += eps;
      *p = p->with_value(Tensor<Cpu>::from_data(moved));
      const double plus = loss();
      moved.mutable_values<double>()[j] -= 2 * eps;
      *p = p->with_value(Tensor<Cpu>::from_data(moved));
      const double minus = loss();
      *p = p->with_value(Tensor<Cpu>::from_data(base));
      const double numeric = (plus - minus) / (2 * eps);
      EXPECT_NEAR(analytic[j], numeric, 1e-6 * (1 + std::abs(numeric))) << name << " element " << j;
    }
  }
}

TEST(Recompute, WrappedModuleMatchesFiniteDifferences) {
  Recompute<AD> wrapped(SmallMlp(7));
  ::kiln::testing::GradCheck<Cpu>([&](const std::vector<T>& a) { return wrapped(a[0]); },
                                  {::kiln::testing::Uniform({5, 3}, -1, 1, 8)});
  Generator gen(9);
  const T x = T::uniform({5, 3}, -1, 1, gen, DType::kF64).require_grad();
  const T w = T::uniform({5, 2}, 0.5, 1.5, gen, DType::kF64);
  ExpectParameterGradientsMatchFiniteDifferences(wrapped, x, w);
}

// A parameter used twice (the module applied twice, as a tied weight is) gets one gradient,
// the sum of both uses, exactly as without recompute.
TEST(Recompute, AParameterUsedTwiceGetsOneSummedGradient) {
  Generator gen(11);
  Linear<AD> plain(4, 4, gen, LinearOptions{.dtype = DType::kF64});
  Recompute<AD> wrapped(plain.clone());
  const T x = T::uniform({3, 4}, -1, 1, gen, DType::kF64);
  const auto stored = plain(plain(x)).sum().backward();
  std::vector<int> calls(2, 0);
  auto params = wrapped.named_parameters();
  for (size_t i = 0; i < params.size(); ++i)
    params[i].second->register_hook([&calls, i](const Tensor<Cpu>&) { ++calls[i]; });
  const auto recomputed = wrapped(wrapped(x)).sum().backward();
  EXPECT_EQ(calls, std::vector<int>({1, 1}));
  auto plain_params = plain.named_parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(stored.get(*plain_params[i].second)->to_data().ToDoubles(),
              recomputed.get(*params[i].second)->to_data().ToDoubles())
        << params[i].first;
  }
}

int64_t Live() { return autodiff::LiveNodes().load(); }

// The graph a forward leaves for backward: one node per recomputed block (it keeps the block's
// input alone), against every op of the block when stored (10: two norms, three linears, the
// attention, GELU, two residual adds and the MLP's output projection); nothing left after backward. And
// the recomputed forward records nothing inside a block: one node made per block.
TEST(Recompute, KeepsOneGraphNodePerBlock) {
  auto nodes_made_in_forward = [](int64_t layers, bool recompute) {
    Generator gen(13);
    Gpt<AD> gpt({.vocab = 13, .context = 6, .layers = layers, .heads = 2, .width = 8, .recompute = recompute}, gen);
    const T ids = T::from_inner(Tensor<Cpu>::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {1, 6}));
    const uint64_t first = autodiff::NextNodeId();
    const T logits = gpt(ids);
    return static_cast<int64_t>(autodiff::NextNodeId() - first - 1);
  };
  EXPECT_EQ(nodes_made_in_forward(3, true) - nodes_made_in_forward(1, true), 2);
  EXPECT_GT(nodes_made_in_forward(3, false) - nodes_made_in_forward(1, false), 2 * 5);
  auto nodes_after_forward = [](int64_t layers, bool recompute) {
    Generator gen(13);
    Gpt<AD> gpt({.vocab = 13, .context = 6, .layers = layers, .heads = 2, .width = 8, .recompute = recompute}, gen);
    const T ids = T::from_inner(Tensor<Cpu>::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {1, 6}));
    const int64_t before = Live();
    int64_t during = 0;
    {
      const T loss = gpt(ids).sum();
      during = Live() - before;
      (void)loss.backward();
    }
    EXPECT_EQ(Live(), before) << "backward left graph nodes behind";
    return during;
  };
  EXPECT_EQ(nodes_after_forward(3, true) - nodes_after_forward(1, true), 2);
  EXPECT_GT(nodes_after_forward(3, false) - nodes_after_forward(1, false), 2 * 5);
}

// Gradient sync registers a hook per parameter and needs it once per backward, with the final
// gradient; the parameters stay the same leaves.
TEST(Recompute, EveryParameterHookFiresOnceWithItsFinalGradient) {
  Generator gen(17);
  Gpt<AD> gpt({.vocab = 13, .context = 6, .layers = 2, .heads = 2, .width = 8, .dropout = 0.1, .recompute = true}, gen);
  auto params = gpt.named_parameters();
  std::vector<int> calls(params.size(), 0);
  std::vector<std::vector<double>> seen(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    params[i].second->register_hook([&, i](const Tensor<Cpu>& g) {
      ++calls[i];
      seen[i] = g.to_data().ToDoubles();
    });
  }
  const T ids = T::from_inner(Tensor<Cpu>::from_vector(std::vector<int64_t>{1, 2, 3, 4, 5, 6}, {2, 3}));
  const auto grads = gpt(ids).sum().backward();
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(calls[i], 1) << params[i].first;
    ASSERT_TRUE(grads.get(*params[i].second).has_value()) << params[i].first;
    EXPECT_EQ(seen[i], grads.get(*params[i].second)->to_data().ToDoubles()) << params[i].first;
  }
}

// ZeRO-3's use: the parameters hold nothing useful between forward and backward; `before`
// brings the values back for the recompute and `after` takes them away again.
TEST(Recompute, HooksBringTheParametersForTheRecompute) {
  auto stored_model = SmallMlp(19);
  Module<AD>* inner = SmallMlp(19).release();
  std::vector<TensorData> values;
  for (auto& [name, p] : inner->named_parameters()) values.push_back(p->to_data());
  auto set_all = [inner, values](bool real) {
    auto params = inner->named_parameters();
    for (size_t i = 0; i < params.size(); ++i) {
      const Tensor<Cpu> v = Tensor<Cpu>::from_data(values[i]);
      *params[i].second = params[i].second->with_value(real ? v : v * 0.0);
    }
  };
  int before = 0, after = 0;
  Recompute<AD> wrapped(std::unique_ptr<Module<AD>>(inner),
                        {.before = [&] { ++before, set_all(true); }, .after = [&] { ++after, set_all(false); }});
  Generator gen(20);
  const T x = T::uniform({3, 3}, -1, 1, gen, DType::kF64).require_grad();
  const T loss = wrapped(x).sum();
  set_all(false);  // as a sharded module frees its gathered parameters after forward
  const auto grads = loss.backward();
  EXPECT_EQ(before, 1);
  EXPECT_EQ(after, 1);
  const auto want = (*stored_model)(x).sum().backward();
  auto got_params = wrapped.named_parameters();
  auto want_params = stored_model->named_parameters();
  for (size_t i = 0; i < got_params.size(); ++i) {
    EXPECT_EQ(grads.get(*got_params[i].second)->to_data().ToDoubles(),
              want.get(*want_params[i].second)->to_data().ToDoubles())
        << got_params[i].first;
  }
  EXPECT_EQ(grads.get(x)->to_data().ToDoubles(), want.get(x)->to_data().ToDoubles());
}

TEST(Recompute, RecordsNothingAndRecomputesNothingWithoutGradients) {
  int calls = 0;
  Recompute<AD> wrapped(SmallMlp(23), {.before = [&] { ++calls; }});
  Generator gen(24);
  const T x = T::uniform({2, 3}, -1, 1, gen, DType::kF64);
  NoGradScope no_grad;
  const T y = wrapped(x);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_EQ(y.to_data().ToDoubles(), wrapped.inner()(x).to_data().ToDoubles());
  EXPECT_EQ(calls, 0);
}

// A tensor the forward uses that takes gradients but is no parameter of the wrapped modules
// would lose its gradient: backward says so.
TEST(Recompute, ATensorOutsideTheModulesIsAnError) {
  Generator gen(57);
  const T outside = T::uniform({2, 3}, -1, 1, gen, DType::kF64).require_grad();
  Recompute<AD> wrapped(SmallMlp(58));
  const T x = T::uniform({2, 3}, -1, 1, gen, DType::kF64);
  const T y = RecomputeForward<AD>({&wrapped}, x, [&](const T& in) { return wrapped.inner()(in * outside); });
  try {
    (void)y.sum().backward();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(e.status().message(),
              "recompute: the forward used 1 tensor(s) that take gradients and are neither its input nor a "
              "parameter of the recomputed modules; register them as parameters there");
  }
}

// Backward may run where recording is off (the recompute turns it on for itself).
TEST(Recompute, BackwardUnderNoGradScopeStillRecomputes) {
  auto stored = SmallMlp(53);
  Recompute<AD> wrapped(SmallMlp(53));
  Generator gen(54);
  const T x = T::uniform({2, 3}, -1, 1, gen, DType::kF64).require_grad();
  const auto want = (*stored)(x).sum().backward();
  const T loss = wrapped(x).sum();
  NoGradScope no_grad;
  const auto got = loss.backward();
  ASSERT_TRUE(got.get(x).has_value());
  EXPECT_EQ(got.get(x)->to_data().ToDoubles(), want.get(x)->to_data().ToDoubles());
}

// Sequential's segments: dropout inside a segment replays its masks; gradients bit-equal.
TEST(Recompute, SequentialSegmentsGiveTheStoredGradients) {
  auto build = [](size_t segment) {
    Generator gen(29);
    auto net = std::make_unique<Sequential<AD>>();
    net->add<Linear<AD>>(6, 8, gen).add<ReLU<AD>>().add<Dropout<AD>>(0.3, 31).add<Linear<AD>>(8, 5, gen);
    net->add<GELU<AD>>().add<Dropout<AD>>(0.2, 37).add<Linear<AD>>(5, 2, gen);
    net->set_recompute(segment);
    return net;
  };
  auto run = [](Sequential<AD>& net) {
    Record out;
    for (int round = 0; round < 2; ++round) {
      Generator data(41 + round);
      const T x = T::uniform({4, 6}, -1, 1, data).require_grad();
      const T y = net(x);
      const auto grads = (y * y).sum().backward();
      out.emplace_back("input", grads.get(x)->to_data().ToDoubles());
      AppendGrads<Cpu>(net, grads, std::to_string(round) + ":", out);
    }
    return out;
  };
  auto stored = build(0);
  const Record want = run(*stored);
  for (size_t segment : {1, 3, 7}) {
    SCOPED_TRACE(segment);
    auto net = build(segment);
    ExpectBitEqual(want, run(*net));
  }
}

// Recompute changes no name: a checkpoint written with it loads without it, and back.
TEST(Recompute, CheckpointsLoadWithAndWithoutRecompute) {
  const GptConfig config{.vocab = 13, .context = 6, .layers = 2, .heads = 2, .width = 8, .dropout = 0.1};
  GptConfig on = config;
  on.recompute = true;
  Generator g1(43), g2(44), g3(45);
  Gpt<AD> with(on, g1), without(config, g2), again(on, g3);
  auto names = [](Module<AD>& m) {
    std::vector<std::string> out;
    for (auto& [name, p] : m.named_parameters()) out.push_back(name);
    for (auto& [name, g] : m.named_generators()) out.push_back(name);
    return out;
  };
  EXPECT_EQ(names(with), names(without));
  auto wrapped = SmallMlp(47);
  std::vector<std::string> inner_names = names(*wrapped);
  Recompute<AD> recompute(std::move(wrapped));
  EXPECT_EQ(names(recompute), inner_names);

  const std::string dir = ::testing::TempDir();
  const std::string with_path = dir + "/recompute_on.safetensors", without_path = dir + "/recompute_off.safetensors";
  ASSERT_TRUE(SaveCheckpoint<Cpu>(with_path, with).ok());
  ASSERT_TRUE(LoadCheckpoint<Cpu>(with_path, without).ok());
  auto values = [](Module<AD>& m) {
    std::vector<std::vector<double>> out;
    for (auto& [name, p] : m.named_parameters()) out.push_back(p->to_data().ToDoubles());
    return out;
  };
  EXPECT_EQ(values(without), values(with));
  ASSERT_TRUE(SaveCheckpoint<Cpu>(without_path, without).ok());
  ASSERT_TRUE(LoadCheckpoint<Cpu>(without_path, again).ok());
  EXPECT_EQ(values(again), values(with));
}

}  // namespace
}  // namespace kiln::nn
