// Sampling with a key-value cache: the cached logits of every new position equal the whole
// window's (recomputed here without the cache), the same seed picks the same tokens either way,
// also past the positional table, and misuse of the cache is refused.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/cpu/cpu_backend.h"
#include "nn/generate.h"

namespace kiln::nn {
namespace {

using ADB = Autodiff<Cpu>;
using T = Tensor<ADB>;

Gpt<ADB> Model(DType dtype, Generator& gen) {
  return Gpt<ADB>({.vocab = 13, .context = 12, .layers = 2, .heads = 2, .width = 8, .dtype = dtype}, gen);
}

T Ids(const std::vector<int64_t>& ids) { return T::from_vector(ids, {1, static_cast<int64_t>(ids.size())}); }

TEST(Generate, CachedLogitsEqualTheWholeWindows) {
  Generator gen(1);
  Gpt<ADB> model = Model(DType::kF64, gen);
  model.eval();
  NoGradScope no_grad;
  std::vector<int64_t> ids = {3, 1, 4, 1, 5};
  Gpt<ADB>::Cache cache;
  T logits = model.forward_cached(Ids(ids), cache);
  for (int step = 0; step < 7; ++step) {
    const T whole = model(Ids(ids));
    const int64_t s = whole.size(1);
    const auto want = whole.slice(1, s - 1, s).to_data().ToDoubles();
    const auto got = logits.slice(1, logits.size(1) - 1, logits.size(1)).to_data().ToDoubles();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-12) << "step " << step;
    ids.push_back((step * 5 + 2) % 13);
    logits = model.forward_cached(Ids({ids.back()}), cache);
  }
  EXPECT_EQ(cache.length, 12);
}

TEST(Generate, TheCachePicksTheSameTokensPastThePositionalTable) {
  for (DType dtype : {DType::kF32, DType::kF64}) {
    Generator init(2);
    Gpt<ADB> model = Model(dtype, init);
    Generator a(7), b(7);
    const auto cached = Generate(model, {1, 2, 3}, 30, a, {.temperature = 0.8, .top_k = 5});
    const auto plain = Generate(model, {1, 2, 3}, 30, b, {.temperature = 0.8, .top_k = 5, .kv_cache = false});
    EXPECT_EQ(cached, plain) << DTypeName(dtype);
    EXPECT_EQ(cached.size(), 30u);
    EXPECT_TRUE(model.is_training());  // left as it was
  }
}

TEST(Generate, TopOnePicksTheLikeliest) {
  Generator gen(3);
  EXPECT_EQ(PickToken({0.1, 2.0, -1.0, 1.9}, {.top_k = 1}, gen), 1);
  EXPECT_EQ(PickToken({5.0, 2.0}, {.temperature = 1e-3}, gen), 0);
}

TEST(Generate, MisuseOfTheCacheIsRefused) {
  Generator gen(4);
  Gpt<ADB> model = Model(DType::kF32, gen);
  NoGradScope no_grad;
  Gpt<ADB>::Cache cache;
  model.forward_cached(Ids({1, 2}), cache);
  try {
    model.forward_cached(Ids({1, 2}), cache);
    FAIL() << "two positions after the first call";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.status().message()), "CausalSelfAttention: a cached step takes one position, got 2");
  }
  try {
    model.forward_cached(Ids(std::vector<int64_t>(11, 1)), cache);
    FAIL() << "past the table";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.status().message()),
              "Gpt: 2 cached and 11 new positions exceed the positional table of 12");
  }
  EXPECT_THROW(Generate(model, {}, 3, gen), Error);
}

}  // namespace
}  // namespace kiln::nn
