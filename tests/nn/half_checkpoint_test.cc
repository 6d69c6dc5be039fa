// F16 and BF16 in safetensors files and checkpoints: bit-exact round trips, the errors for a
// dtype kiln lacks and for a file of another precision than the model, conversion on request,
// and a BF16 state dict laid out as PyTorch writes it giving the logits it should.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/cpu/cpu_backend.h"
#include "nn/activation.h"
#include "nn/checkpoint.h"
#include "nn/linear.h"
#include "nn/optim.h"
#include "nn/sequential.h"
#include "nn/training_checkpoint.h"

namespace kiln::nn {
namespace {

namespace fs = std::filesystem;
using AD = Autodiff<Cpu>;
using T = Tensor<AD>;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void Spill(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// A safetensors file: the header's length, the header padded with spaces to 8 bytes (as both
// kiln and the safetensors library pad it), the data.
std::string Safetensors(std::string header, const std::string& data) {
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header + data;
}

// The header text of a safetensors file.
std::string HeaderOf(const std::string& bytes) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
  return bytes.substr(8, n);
}

template <class H>
TensorData HalfData(const std::vector<uint16_t>& bits, Shape shape) {
  std::vector<H> values;
  for (uint16_t b : bits) values.push_back(H::FromBits(b));
  return TensorData::FromVector(values, std::move(shape));
}

std::vector<uint16_t> Bits(const TensorData& data) {
  std::vector<uint16_t> out(data.numel());
  std::memcpy(out.data(), data.raw(), out.size() * 2);
  return out;
}

// Linear(3 -> 2) of `dtype` with weights from `seed`.
std::unique_ptr<Linear<AD>> Small(DType dtype, uint64_t seed) {
  Generator gen(seed);
  return std::make_unique<Linear<AD>>(3, 2, gen, LinearOptions{.dtype = dtype});
}

class HalfCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "model.safetensors").string();
  }
  fs::path dir_;
  std::string path_;
};

// Zeros, one, the largest finite, infinities, NaNs (quiet, signalling, with payloads and signs)
// and subnormals: all must come back as the same bits, little-endian in the file.
TEST_F(HalfCheckpointTest, F16AndBf16RoundTripBitForBit) {
  const std::vector<uint16_t> bf16 = {0x0000, 0x8000, 0x3f80, 0x7f7f, 0x7f80, 0xff80,
                                      0x7fc0, 0xffc1, 0x7f81, 0x0001, 0x807f, 0x0080};
  const std::vector<uint16_t> f16 = {0x0000, 0x8000, 0x3c00, 0x7bff, 0x7c00, 0xfc00,
                                     0x7e00, 0xfd01, 0x7c01, 0x0001, 0x83ff, 0x0400};
  TensorFile file;
  file.tensors.emplace("b", HalfData<BFloat16>(bf16, {3, 4}));
  file.tensors.emplace("h", HalfData<Float16>(f16, {12}));
  file.tensors.emplace("e", HalfData<BFloat16>({}, {0, 5}));
  ASSERT_TRUE(WriteSafetensors(path_, file).ok());
  const std::string bytes = Slurp(path_);
  const std::string header = HeaderOf(bytes);
  EXPECT_NE(header.find(R"("b":{"data_offsets":[0,24],"dtype":"BF16","shape":[3,4]})"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("h":{"data_offsets":[24,48],"dtype":"F16","shape":[12]})"), std::string::npos) << header;
  // The data: "b" first (names in order, "e" empty), each element low byte first.
  const std::string data = bytes.substr(8 + header.size());
  ASSERT_EQ(data.size(), 48u);
  EXPECT_EQ(data.substr(4, 2), "\x80\x3f");                   // bf16 1.0 is 0x3f80
  EXPECT_EQ(data.substr(28, 2), std::string("\x00\x3c", 2));  // f16 1.0 is 0x3c00

  const absl::StatusOr<TensorFile> back = ReadSafetensors(path_);
  ASSERT_TRUE(back.ok()) << back.status();
  const TensorData& b = back->tensors.at("b");
  const TensorData& h = back->tensors.at("h");
  EXPECT_EQ(b.dtype(), DType::kBF16);
  EXPECT_EQ(b.shape(), Shape({3, 4}));
  EXPECT_EQ(Bits(b), bf16);
  EXPECT_EQ(h.dtype(), DType::kF16);
  EXPECT_EQ(Bits(h), f16);
  EXPECT_EQ(back->tensors.at("e").dtype(), DType::kBF16);
  EXPECT_EQ(back->tensors.at("e").shape(), Shape({0, 5}));
  // And as numbers: the subnormals and infinities decode as such.
  EXPECT_EQ(b.AsDouble(9), std::ldexp(1.0, -133));
  EXPECT_EQ(h.AsDouble(9), std::ldexp(1.0, -24));
  EXPECT_EQ(h.AsDouble(4), std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(b.AsDouble(8)));
}

// A file that is sound but holds a dtype kiln has no type for is the caller's problem
// (INVALID_ARGUMENT, naming the tensor and dtype), not damage; damage is still DATA_LOSS.
TEST_F(HalfCheckpointTest, UnsupportedDtypesAreInvalidArgumentNamingThem) {
  const std::string reads = "kiln reads F64, F32, BF16, F16, I64, I32, BOOL";
  const std::pair<const char*, int> cases[] = {{"F8_E4M3", 1}, {"F8_E5M2", 1}, {"U8", 1},  {"I8", 1}, {"I16", 2},
                                               {"U16", 2},     {"U32", 4},     {"U64", 8}, {"C64", 8}};
  for (const auto& [dtype, size] : cases) {
    const std::string header =
        absl::StrCat(R"({"a.w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)", R"("q.w":{"dtype":")", dtype,
                     R"(","shape":[2,3],"data_offsets":[4,)", 4 + 6 * size, "]}}");
    Spill(path_, Safetensors(header, std::string(4 + 6 * size, '\0')));
    const absl::Status s = ReadSafetensors(path_).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(s.message(), absl::StrCat(path_, ": tensor q.w has dtype ", dtype, ", which kiln does not read (it ",
                                        reads.substr(5), "; convert the tensor to one of them before saving)"));
    // Loading a model from it says the same.
    EXPECT_EQ(LoadCheckpoint<Cpu>(path_, *Small(DType::kF32, 1)), s);
    // The same tensor with a byte range too short for its dtype and shape is damage.
    const std::string short_header =
        absl::StrCat(R"({"q.w":{"dtype":")", dtype, R"(","shape":[2,3],"data_offsets":[0,)", 6 * size - 1, "]}}");
    Spill(path_, Safetensors(short_header, std::string(6 * size - 1, '\0')));
    const absl::Status damaged = ReadSafetensors(path_).status();
    EXPECT_EQ(damaged.code(), absl::StatusCode::kDataLoss) << damaged;
    EXPECT_NE(damaged.message().find(absl::StrCat("do not hold ", dtype, "[2,3]")), std::string::npos) << damaged;
  }
  // A dtype the format may add later: its size is unknown, but its range must still be in
  // the file and tile the data.
  Spill(path_, Safetensors(R"({"w":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}})", "ab"));
  absl::Status s = ReadSafetensors(path_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(R"(: tensor w has dtype "F4", which kiln does not read)"), std::string::npos) << s;
  Spill(path_, Safetensors(R"({"w":{"dtype":"F4","shape":[4],"data_offsets":[0,9]}})", "ab"));
  EXPECT_EQ(ReadSafetensors(path_).status().code(), absl::StatusCode::kDataLoss);
  // A hostile dtype string is escaped and cut short in the message.
  Spill(path_, Safetensors(absl::StrCat(R"({"w":{"dtype":")", std::string(1000, 'X'), "\\u0007",
                                        R"(","shape":[0],"data_offsets":[0,0]}})"),
                           ""));
  s = ReadSafetensors(path_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find(absl::StrCat("\"", std::string(32, 'X'), "...\", which")), std::string::npos) << s;
  EXPECT_LT(s.message().size(), path_.size() + 250) << s;
  // No dtype, or one that is not a string, is damage.
  Spill(path_, Safetensors(R"({"w":{"dtype":7,"shape":[0],"data_offsets":[0,0]}})", ""));
  s = ReadSafetensors(path_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(s.message(), path_ + " is not a valid safetensors file: tensor w has no dtype");
}

TEST_F(HalfCheckpointTest, SavingABf16ModelWritesBf16) {
  auto model = Small(DType::kBF16, 3);
  ASSERT_TRUE(SaveCheckpoint(path_, *model).ok());
  const std::string header = HeaderOf(Slurp(path_));
  EXPECT_NE(header.find(R"("bias":{"data_offsets":[0,4],"dtype":"BF16","shape":[2]})"), std::string::npos) << header;
  EXPECT_NE(header.find(R"("weight":{"data_offsets":[4,16],"dtype":"BF16","shape":[2,3]})"), std::string::npos)
      << header;
  const auto back = ReadSafetensors(path_);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(Bits(back->tensors.at("weight")), Bits(model->weight().to_data()));
}

// Without LoadOptions::convert_dtype a file of another precision is refused, naming the
// parameter and both dtypes, and the model keeps its values; with it, values convert with
// kiln's rounding.
TEST_F(HalfCheckpointTest, ADtypeMismatchIsAnErrorUnlessConversionIsAsked) {
  auto bf16 = Small(DType::kBF16, 4);
  ASSERT_TRUE(SaveCheckpoint(path_, *bf16).ok());
  auto f32 = Small(DType::kF32, 5);
  const std::vector<double> before = f32->weight().to_data().ToDoubles();
  absl::Status s = LoadCheckpoint<Cpu>(path_, *f32);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message(), path_ +
                             ": parameter weight is bf16 in the file but f32 in the model "
                             "(LoadOptions{.convert_dtype = true} converts it)");
  EXPECT_EQ(f32->weight().to_data().ToDoubles(), before);

  // bf16 -> f32 is exact.
  ASSERT_TRUE(LoadCheckpoint<Cpu>(path_, *f32, {.convert_dtype = true}).ok());
  EXPECT_EQ(f32->weight().dtype(), DType::kF32);
  EXPECT_EQ(f32->weight().to_data().ToDoubles(), bf16->weight().to_data().ToDoubles());

  // A shape mismatch is not excused by conversion; an integer tensor is never converted.
  Generator gen(6);
  Linear<AD> wide(4, 2, gen);
  s = LoadCheckpoint<Cpu>(path_, wide, {.convert_dtype = true});
  EXPECT_EQ(s.message(), path_ + ": parameter weight is bf16[2,3] in the file but f32[2,4] on cpu:0 in the model");
  TensorFile ints;
  ints.tensors.emplace("weight", TensorData(Shape({2, 3}), DType::kI32));
  ints.tensors.emplace("bias", TensorData(Shape({2}), DType::kF32));
  ASSERT_TRUE(WriteSafetensors(path_, ints).ok());
  s = LoadCheckpoint<Cpu>(path_, *f32, {.convert_dtype = true});
  EXPECT_EQ(s.message(), path_ +
                             ": parameter weight is i32 in the file but f32 in the model; only floating dtypes "
                             "are converted");
}

// f32 -> bf16 and f16 round to nearest, ties to even, as everywhere in kiln.
TEST_F(HalfCheckpointTest, ConversionRoundsToNearestEven) {
  const float tie_down = 1 + 0x1p-8f;              // halfway between 1 and 1 + 2^-7: to 1 (even)
  const float tie_up = 1 + 3 * 0x1p-8f;            // halfway between 1 + 2^-7 and 1 + 2^-6: up (even)
  const float above_tie = 1 + 0x1p-8f + 0x1p-20f;  // just above halfway: up
  const float tiny = -0x1.8p-133f;                 // an f32 subnormal, 1.5 bf16 ulps: to 2 (even)
  const float huge = 3.4e38f;                      // past bf16's largest + half an ulp: infinity
  const float nan = std::numeric_limits<float>::quiet_NaN();
  TensorFile file;
  file.tensors.emplace(
      "weight", TensorData::FromVector(std::vector<float>{tie_down, tie_up, above_tie, tiny, huge, nan}, {2, 3}));
  file.tensors.emplace("bias", TensorData::FromVector(std::vector<float>{-2.5f, 65520.0f}, {2}));
  ASSERT_TRUE(WriteSafetensors(path_, file).ok());

  auto bf16 = Small(DType::kBF16, 7);
  ASSERT_TRUE(LoadCheckpoint<Cpu>(path_, *bf16, {.convert_dtype = true}).ok());
  const std::vector<uint16_t> w = Bits(bf16->weight().to_data());
  EXPECT_EQ(w[0], 0x3f80);
  EXPECT_EQ(w[1], 0x3f82);
  EXPECT_EQ(w[2], 0x3f81);
  EXPECT_EQ(w[3], 0x8002);
  EXPECT_EQ(w[4], 0x7f80);
  EXPECT_EQ(w[5] & 0x7fc0, 0x7fc0);  // a quiet NaN
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(w[i], half_bits::FloatToBf16(file.tensors.at("weight").values<float>()[i])) << i;
  }

  Generator gen(8);
  Linear<AD> f16(3, 2, gen, {.dtype = DType::kF16});
  ASSERT_TRUE(LoadCheckpoint<Cpu>(path_, f16, {.convert_dtype = true}).ok());
  const std::vector<uint16_t> b = Bits(f16.named_parameters()[1].second->to_data());
  EXPECT_EQ(b[0], 0xc100);  // -2.5, exact
  EXPECT_EQ(b[1], 0x7c00);  // 65520 is halfway past f16's largest (65504): infinity
}

// Training state converts with the parameters: a bf16 run's checkpoint resumes into an f32
// model and optimizer only when asked.
TEST_F(HalfCheckpointTest, RestoreTrainingConvertsOnlyWhenAsked) {
  auto bf16 = Small(DType::kBF16, 9);
  Sgd<Cpu> sgd(0.1, {.momentum = 0.9});
  const T x = T::from_vector(std::vector<float>{0.5f, -1, 2}, {1, 3}).to(DType::kBF16);
  sgd.step(*bf16, (*bf16)(x).sum().backward());
  ASSERT_EQ(sgd.state().at("momentum/weight").dtype(), DType::kBF16);
  const std::string ck = dir_.string();
  ASSERT_TRUE(WriteTrainingCheckpoint(ck, 1, SnapshotTraining(*bf16, sgd, {{"run", "r"}})).ok());
  const auto read = ReadTrainingCheckpoint(TrainingCheckpointPath(ck, 1));
  ASSERT_TRUE(read.ok()) << read.status();

  auto f32 = Small(DType::kF32, 10);
  Sgd<Cpu> resumed(0.1, {.momentum = 0.9});
  const std::string path = TrainingCheckpointPath(ck, 1);
  absl::Status s = RestoreTraining(*read, path, *f32, resumed);
  EXPECT_EQ(s.message(), path +
                             ": parameter weight is bf16 in the file but f32 in the model "
                             "(LoadOptions{.convert_dtype = true} converts it)");
  EXPECT_EQ(resumed.steps(), 0);
  ASSERT_TRUE(RestoreTraining(*read, path, *f32, resumed, {.convert_dtype = true}).ok());
  EXPECT_EQ(resumed.steps(), 1);
  EXPECT_EQ(resumed.state().at("momentum/weight").dtype(), DType::kF32);
  EXPECT_EQ(resumed.state().at("momentum/weight").to_data().ToDoubles(),
            sgd.state().at("momentum/weight").to_data().ToDoubles());
  EXPECT_EQ(f32->weight().to_data().ToDoubles(), bf16->weight().to_data().ToDoubles());
}

// The examples' MLP at a small size, named as PyTorch names nn.Sequential(nn.Flatten(),
// nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 16), nn.ReLU(), nn.Linear(16, 4)): "1.weight",
// "1.bias", "3.weight", ...
constexpr int64_t kWidths[] = {12, 16, 16, 4};
constexpr int kLayers = 3;

std::unique_ptr<Sequential<AD>> Mlp(DType dtype) {
  Generator gen(11);
  auto net = std::make_unique<Sequential<AD>>();
  net->add<Flatten<AD>>();
  for (int i = 0; i < kLayers; ++i) {
    net->add<Linear<AD>>(kWidths[i], kWidths[i + 1], gen, LinearOptions{.dtype = dtype});
    if (i + 1 < kLayers) net->add<ReLU<AD>>();
  }
  return net;
}

// n values uniform in [-scale, scale], rounded to bf16 (reproducible on every platform).
std::vector<BFloat16> Bf16Values(std::mt19937& rng, int64_t n, double scale) {
  std::vector<BFloat16> out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(static_cast<float>(scale * ((rng() >> 8) * 0x1p-23 - 1)));
  return out;
}

std::vector<double> Decoded(const std::vector<BFloat16>& v) {
  std::vector<double> out;
  for (BFloat16 h : v) out.push_back(static_cast<double>(h));
  return out;
}

// The file safetensors.torch.save_file(model.state_dict(), path, {"format": "pt"}) writes for
// a bf16 model: compact JSON with "__metadata__" first, then the tensors in the order of
// their data, which the library sorts by dtype and then by name; each entry's keys are dtype,
// shape, data_offsets in that order; the header padded with spaces to 8 bytes; the data
// little-endian. `tensors` is by name, so its order is the library's (one dtype here).
std::string TorchStyleFile(const std::map<std::string, std::pair<Dims, std::vector<BFloat16>>>& tensors) {
  std::string header = R"({"__metadata__":{"format":"pt"})";
  std::string data;
  for (const auto& [name, tensor] : tensors) {
    const auto& [dims, values] = tensor;
    const size_t begin = data.size();
    for (BFloat16 v : values) data.append({static_cast<char>(v.bits & 0xff), static_cast<char>(v.bits >> 8)});
    absl::StrAppend(&header, ",\"", name, R"(":{"dtype":"BF16","shape":[)", absl::StrJoin(dims, ","),
                    R"(],"data_offsets":[)", begin, ",", data.size(), "]}");
  }
  return Safetensors(header + "}", data);
}

// The MLP's logits in double precision over the decoded bf16 weights, with two bounds on how
// far a model may be from them (per logit), carried through the layers by forward error
// analysis. With u the unit roundoff, a layer z = h W^T + b computed from an input that is off
// by e (elementwise) is off by |W| e plus its own rounding times (|h| + e)|W|^T + |b|: in f32,
// a dot product of n terms and the bias add cost (n + 2) u32 (u32 = 2^-24); a bf16 layer
// (kiln: f32 arithmetic, the matmul rounded once to bf16, then the bias add rounded once)
// costs two bf16 roundings, 2 u16 (u16 = 2^-8), plus the f32 terms and u16^2. ReLU is
// 1-Lipschitz, so it passes an error bound through unchanged.
struct Reference {
  std::vector<double> logits, f32_bound, bf16_bound;
};

Reference Forward(const std::vector<double>& x, int64_t batch, const std::vector<std::vector<double>>& weights,
                  const std::vector<std::vector<double>>& biases) {
  constexpr double u16 = 0x1p-8, u32 = 0x1p-24;
  std::vector<double> h = x, e32(x.size(), 0), e16(x.size(), 0);  // x is exact in bf16
  for (int l = 0; l < kLayers; ++l) {
    const int64_t in = kWidths[l], out = kWidths[l + 1];
    const double c32 = (in + 2) * u32 * 1.01, c16 = 2 * u16 + u16 * u16 + c32;
    std::vector<double> z(batch * out), n32(batch * out), n16(batch * out);
    for (int64_t r = 0; r < batch; ++r) {
      for (int64_t j = 0; j < out; ++j) {
        double sum = biases[l][j], carried32 = 0, carried16 = 0, size32 = 0, size16 = 0;
        for (int64_t k = 0; k < in; ++k) {
          const double w = weights[l][j * in + k], v = h[r * in + k];
          sum += v * w;
          carried32 += std::abs(w) * e32[r * in + k];
          carried16 += std::abs(w) * e16[r * in + k];
          size32 += (std::abs(v) + e32[r * in + k]) * std::abs(w);
          size16 += (std::abs(v) + e16[r * in + k]) * std::abs(w);
        }
        const bool relu = l + 1 < kLayers;
        z[r * out + j] = relu ? std::max(sum, 0.0) : sum;
        n32[r * out + j] = carried32 + c32 * (size32 + std::abs(biases[l][j]));
        n16[r * out + j] = carried16 + c16 * (size16 + std::abs(biases[l][j]));
      }
    }
    h = std::move(z), e32 = std::move(n32), e16 = std::move(n16);
  }
  return {h, e32, e16};
}

// "A PyTorch-written bf16 state dict loads and gives PyTorch's logits": the file is written
// here byte for byte as PyTorch would (CI has no PyTorch), loaded into an f32 model (with
// conversion, exact) and into a bf16 model (as is), and both models' logits are compared with
// an independent double-precision forward pass within the bounds above. PyTorch's own f32 and
// bf16 logits are within the same kind of bound of that reference.
TEST_F(HalfCheckpointTest, ATorchWrittenBf16StateDictGivesItsLogits) {
  std::mt19937 rng(2024);
  std::map<std::string, std::pair<Dims, std::vector<BFloat16>>> state;
  std::vector<std::vector<double>> weights, biases;
  for (int l = 0; l < kLayers; ++l) {
    const int64_t in = kWidths[l], out = kWidths[l + 1];
    const std::string prefix = absl::StrCat(2 * l + 1, ".");  // Flatten is 0, the ReLUs are even
    auto w = Bf16Values(rng, out * in, 1 / std::sqrt(static_cast<double>(in)));
    auto b = Bf16Values(rng, out, 0.25);
    weights.push_back(Decoded(w));
    biases.push_back(Decoded(b));
    state[prefix + "weight"] = {{out, in}, std::move(w)};
    state[prefix + "bias"] = {{out}, std::move(b)};
  }
  const std::string torch_path = (dir_ / "torch_mlp_bf16.safetensors").string();
  Spill(torch_path, TorchStyleFile(state));
  constexpr int64_t kBatch = 5;
  const std::vector<BFloat16> x = Bf16Values(rng, kBatch * 12, 2);
  const T x_bf16 = T::from_data(TensorData::FromVector(x, {kBatch, 3, 4}));
  const Reference ref = Forward(Decoded(x), kBatch, weights, biases);

  auto f32 = Mlp(DType::kF32);
  absl::Status s = LoadCheckpoint<Cpu>(torch_path, *f32);
  EXPECT_EQ(s.message(), torch_path +
                             ": parameter 1.weight is bf16 in the file but f32 in the model "
                             "(LoadOptions{.convert_dtype = true} converts it)");
  ASSERT_TRUE(LoadCheckpoint<Cpu>(torch_path, *f32, {.convert_dtype = true}).ok());
  auto bf16 = Mlp(DType::kBF16);
  ASSERT_TRUE(LoadCheckpoint<Cpu>(torch_path, *bf16).ok());
  f32->eval();
  bf16->eval();
  const TensorData y32 = (*f32)(x_bf16.to(DType::kF32)).to_data();
  const TensorData y16 = (*bf16)(x_bf16).to_data();
  ASSERT_EQ(y32.dtype(), DType::kF32);
  ASSERT_EQ(y16.dtype(), DType::kBF16);
  ASSERT_EQ(y16.shape(), Shape({kBatch, 4}));
  double largest = 0, worst16 = 0, bound16 = 0;
  bool differ = false;
  for (int64_t i = 0; i < y16.numel(); ++i) {
    EXPECT_LE(std::abs(y32.AsDouble(i) - ref.logits[i]), ref.f32_bound[i]) << i;
    EXPECT_LE(std::abs(y16.AsDouble(i) - ref.logits[i]), ref.bf16_bound[i]) << i;
    largest = std::max(largest, std::abs(ref.logits[i]));
    worst16 = std::max(worst16, std::abs(y16.AsDouble(i) - ref.logits[i]));
    bound16 = std::max(bound16, ref.bf16_bound[i]);
    differ |= y16.AsDouble(i) != y32.AsDouble(i);
  }
  // The bound is worst-case (it assumes no rounding errors cancel), yet tight enough to catch
  // a wrong load: the 16 x 16 layer's weights read transposed move some logit past it.
  std::vector<std::vector<double>> transposed = weights;
  for (int64_t j = 0; j < 16; ++j) {
    for (int64_t k = 0; k < 16; ++k) transposed[1][j * 16 + k] = weights[1][k * 16 + j];
  }
  const Reference wrong = Forward(Decoded(x), kBatch, transposed, biases);
  bool caught = false;
  for (int64_t i = 0; i < y16.numel(); ++i) caught |= std::abs(wrong.logits[i] - ref.logits[i]) > ref.bf16_bound[i];
  EXPECT_TRUE(caught);
  EXPECT_TRUE(differ);
  std::cout << "bf16 logits: largest error " << worst16 << ", largest bound " << bound16 << ", largest logit "
            << largest << "\n";

  // Saved again by kiln, the bf16 model's file holds the same bits under the same names; it
  // and the inputs and logits stay in the test's folder for checking against PyTorch.
  const std::string kiln_path = (dir_ / "kiln_mlp_bf16.safetensors").string();
  ASSERT_TRUE(SaveCheckpoint(kiln_path, *bf16).ok());
  const auto saved = ReadSafetensors(kiln_path);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_EQ(saved->tensors.size(), state.size());
  for (const auto& [name, tensor] : state) {
    const TensorData& t = saved->tensors.at(name);
    EXPECT_EQ(t.dtype(), DType::kBF16) << name;
    EXPECT_EQ(t.shape(), Shape(tensor.first)) << name;
    std::vector<uint16_t> bits;
    for (BFloat16 v : tensor.second) bits.push_back(v.bits);
    EXPECT_EQ(Bits(t), bits) << name;
  }
  TensorFile io;
  io.tensors.emplace("x", x_bf16.to(DType::kF32).to_data());
  io.tensors.emplace("logits_f32", y32);
  io.tensors.emplace("logits_bf16", y16);
  io.tensors.emplace("bound_f32", TensorData::FromVector(ref.f32_bound, y16.shape()));
  io.tensors.emplace("bound_bf16", TensorData::FromVector(ref.bf16_bound, y16.shape()));
  ASSERT_TRUE(WriteSafetensors((dir_ / "kiln_mlp_io.safetensors").string(), io).ok());
}

}  // namespace
}  // namespace kiln::nn
