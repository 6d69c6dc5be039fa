// nn::Gpt in nanoGPT's layout: the names nanoGPT's GPT state dict has (written out here by hand
// from nanoGPT's model, not derived from the mapping under test), a round trip through a file,
// and the errors a mismatched or foreign checkpoint gets. (Against nanoGPT's GPT in PyTorch
// itself: bench/nanogpt_compat.sh, outside the tests, where PyTorch is installed.)
#include <gtest/gtest.h>

#include <unistd.h>
#include <cstdio>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/gpt.h"
#include "nn/nanogpt_checkpoint.h"

namespace kiln::nn {
namespace {

using ADB = Autodiff<Cpu>;

GptConfig Small(int64_t layers = 2) { return {.vocab = 11, .context = 8, .layers = layers, .heads = 2, .width = 8}; }

std::string TempPath(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name, "-", getpid(), ".safetensors");
}

std::vector<double> Flat(Module<ADB>& m) {
  std::vector<double> out;
  for (auto& [name, p] : m.named_parameters()) {
    for (double v : p->to_data().ToDoubles()) out.push_back(v);
  }
  return out;
}

// nanoGPT's GPT(n_layer=2, bias=True).state_dict() keys, without the masks.
std::set<std::string> NanoGptKeys() {
  std::set<std::string> keys = {"transformer.wte.weight", "transformer.wpe.weight", "transformer.ln_f.weight",
                                "transformer.ln_f.bias", "lm_head.weight"};
  for (int n : {0, 1}) {
    for (const char* part : {"ln_1", "attn.c_attn", "attn.c_proj", "ln_2", "mlp.c_fc", "mlp.c_proj"}) {
      keys.insert(absl::StrCat("transformer.h.", n, ".", part, ".weight"));
      keys.insert(absl::StrCat("transformer.h.", n, ".", part, ".bias"));
    }
  }
  return keys;
}

TEST(NanoGpt, WritesNanoGptsStateDictKeysWithTheHeadTied) {
  Generator gen(1);
  Gpt<ADB> model(Small(), gen);
  const std::string path = TempPath("export");
  ASSERT_TRUE(SaveNanoGpt<Cpu>(path, model).ok());
  auto file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok()) << file.status();
  std::set<std::string> keys;
  for (const auto& [name, data] : file->tensors) keys.insert(name);
  EXPECT_EQ(keys, NanoGptKeys());
  EXPECT_EQ(file->tensors.at("lm_head.weight").ToDoubles(), model.token_embedding().to_data().ToDoubles());
  EXPECT_EQ(file->tensors.at("transformer.h.1.attn.c_attn.weight").shape(), Shape({24, 8}));  // [3 d, d]: out, in
  std::remove(path.c_str());
}

TEST(NanoGpt, ReadsItBackIntoAnotherModel) {
  Generator a(1), b(2);
  Gpt<ADB> trained(Small(), a), fresh(Small(), b);
  const std::string path = TempPath("roundtrip");
  ASSERT_TRUE(SaveNanoGpt<Cpu>(path, trained).ok());
  ASSERT_NE(Flat(fresh), Flat(trained));
  const absl::Status loaded = LoadNanoGpt<Cpu>(path, fresh);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(Flat(fresh), Flat(trained));
  std::remove(path.c_str());
}

// nanoGPT on PyTorch 1.13 saves each block's causal mask as "attn.bias": not a parameter, skipped.
TEST(NanoGpt, SkipsTheCausalMasks) {
  Generator a(1), b(2);
  Gpt<ADB> trained(Small(), a), fresh(Small(), b);
  TensorFile file;
  for (auto& [name, p] : trained.named_parameters()) file.tensors.emplace(name, p->to_data());
  auto nano = ToNanoGptLayout(file);
  ASSERT_TRUE(nano.ok());
  nano->tensors.emplace("transformer.h.0.attn.bias", TensorData(Shape({1, 1, 8, 8}), DType::kF32));
  const std::string path = TempPath("masks");
  ASSERT_TRUE(WriteSafetensors(path, *nano).ok());
  EXPECT_TRUE(LoadNanoGpt<Cpu>(path, fresh).ok());
  EXPECT_EQ(Flat(fresh), Flat(trained));
  std::remove(path.c_str());
}

// The exact GELU (nanoGPT's) is an option of the blocks: the same weights give other outputs.
TEST(NanoGpt, ExactGeluIsAnOptionOfTheBlocks) {
  Generator a(1), b(1), data(5);
  TransformerBlock<ADB> tanh_block(8, 2, a), exact_block(8, 2, b, {.gelu = functional::GeluApproximation::kNone});
  ASSERT_EQ(Flat(tanh_block), Flat(exact_block));
  const auto x = Tensor<ADB>::uniform({1, 4, 8}, -3, 3, data);
  const auto u = tanh_block(x).to_data().ToDoubles(), v = exact_block(x).to_data().ToDoubles();
  double worst = 0;
  for (size_t i = 0; i < u.size(); ++i) worst = std::max(worst, std::abs(u[i] - v[i]));
  EXPECT_GT(worst, 1e-5);
  EXPECT_LT(worst, 1e-1);
  GptConfig exact = Small();
  exact.gelu = functional::GeluApproximation::kNone;
  Generator c(1);
  EXPECT_EQ(Gpt<ADB>(exact, c).config().gelu, functional::GeluApproximation::kNone);
}

// What a foreign file gets: an error naming the tensor in nanoGPT's terms; the model unchanged.
TEST(NanoGpt, MismatchedFilesAreRefusedByName) {
  Generator a(1), b(2), c(3);
  Gpt<ADB> two(Small(2), a), one(Small(1), b);
  GptConfig wide_vocab = Small(2);
  wide_vocab.vocab = 12;
  Gpt<ADB> wider(wide_vocab, c);
  const std::string path = TempPath("foreign");
  const auto before = Flat(one);

  ASSERT_TRUE(SaveNanoGpt<Cpu>(path, two).ok());
  absl::Status s = LoadNanoGpt<Cpu>(path, one);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            path + ": transformer.h.1.attn.c_proj.bias is not in the model ([8]): another depth or layout");

  ASSERT_TRUE(SaveNanoGpt<Cpu>(path, wider).ok());
  s = LoadNanoGpt<Cpu>(path, two);
  EXPECT_EQ(std::string(s.message()), path + ": transformer.wte.weight is [12,8] but the model's wte.weight is [11,8]");

  auto file = ReadSafetensors(path);
  ASSERT_TRUE(file.ok());
  file->tensors.erase("transformer.h.0.mlp.c_fc.bias");
  ASSERT_TRUE(WriteSafetensors(path, *file).ok());
  Generator d(4);
  Gpt<ADB> also_wider(wide_vocab, d);
  s = LoadNanoGpt<Cpu>(path, also_wider);
  EXPECT_EQ(std::string(s.message()), path + ": no transformer.h.0.mlp.c_fc.bias for the model's h.0.mlp.fc.bias [32]");

  file->tensors.at("lm_head.weight").mutable_values<float>()[0] += 1;
  ASSERT_TRUE(WriteSafetensors(path, *file).ok());
  s = LoadNanoGpt<Cpu>(path, also_wider);
  EXPECT_EQ(std::string(s.message()),
            path +
                ": lm_head.weight differs from transformer.wte.weight: nn::Gpt ties its head to the "
                "token embedding");

  file->tensors.emplace("transformer.h.0.attn.c_attn.weights", TensorData(Shape({1}), DType::kF32));
  ASSERT_TRUE(WriteSafetensors(path, *file).ok());
  s = LoadNanoGpt<Cpu>(path, also_wider);
  EXPECT_EQ(std::string(s.message()),
            path +
                ": nanoGPT layout: transformer.h.0.attn.c_attn.weights is not a tensor of nanoGPT's GPT "
                "(transformer.wte.weight, transformer.h.N.attn.c_attn.weight, ..., lm_head.weight)");
  EXPECT_EQ(Flat(one), before);
  std::remove(path.c_str());
}

TEST(NanoGpt, NamesMapBothWays) {
  EXPECT_EQ(*NanoGptName("h.10.attn.qkv.weight"), "transformer.h.10.attn.c_attn.weight");
  EXPECT_EQ(*KilnNameOfNanoGpt("transformer.h.10.mlp.c_proj.bias"), "h.10.mlp.proj.bias");
  EXPECT_EQ(*KilnNameOfNanoGpt("lm_head.weight"), "");
  for (const char* bad : {"transformer.h.01.ln_1.weight", "transformer.h.-1.ln_1.weight", "transformer.h..ln_1.weight",
                          "transformer.h.0.ln_1.scale", "h.0.ln_1.weight", "transformer.h.0.attn.bias.x"}) {
    EXPECT_FALSE(KilnNameOfNanoGpt(bad).ok()) << bad;
  }
  EXPECT_FALSE(NanoGptName("h.0.attn.c_attn.weight").ok());
}

}  // namespace
}  // namespace kiln::nn
