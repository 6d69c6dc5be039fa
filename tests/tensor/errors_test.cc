// Bad input: every kind gives its documented status code and a message that names the
// operands (dtype, shape, device) and says how to fix it. Nothing aborts.
#include <functional>

#include "tests/tensor/conformance.h"

namespace kiln::testing {
namespace {

template <class B>
class Errors : public ::testing::Test {
 protected:
  void SetUp() override { KILN_SKIP_IF_UNAVAILABLE(B); }
  using Tn = Tensor<B>;
  // Runs `f`, which must throw kiln::Error with exactly this code and message.
  static void ExpectError(const std::function<void()>& f, absl::StatusCode code, const std::string& message) {
    try {
      f();
      ADD_FAILURE() << "no error; expected: " << message;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), code) << e.what();
      EXPECT_EQ(std::string(e.status().message()), message);
    }
  }
};
TYPED_TEST_SUITE(Errors, AllBackends, ConfigNames);

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;
constexpr auto kRange = absl::StatusCode::kOutOfRange;

TYPED_TEST(Errors, MismatchedOperandsNameBoth) {
  using Tn = typename TestFixture::Tn;
  const std::string dev = typename TypeParam::Device().ToString();
  const Tn a = Tn::zeros({2, 3});
  const Tn b = Tn::zeros({4});
  const Tn d = Tn::zeros({2, 3}, DType::kF64);
  this->ExpectError([&] { (void)(a + b); }, kInvalid,
                    "add: shapes do not broadcast: f32[2,3] on " + dev + " and f32[4] on " + dev);
  this->ExpectError(
      [&] { (void)(a * d); }, kInvalid,
      "mul: dtypes differ: f32[2,3] on " + dev + " and f64[2,3] on " + dev + "; convert one with .to(DType)");
  this->ExpectError([&] { (void)a.matmul(a); }, kInvalid,
                    "matmul: inner dims differ (3 vs 2); got f32[2,3] on " + dev + " and f32[2,3] on " + dev);
  this->ExpectError(
      [&] { (void)a.matmul(d); }, kInvalid,
      "matmul: needs two tensors of one floating dtype, got f32[2,3] on " + dev + " and f64[2,3] on " + dev);
  this->ExpectError([&] { (void)Tn::where(a.gt(0), a, b); }, kInvalid,
                    "where: shapes do not broadcast: condition bool[2,3] on " + dev + ", f32[2,3] on " + dev +
                        " and f32[4] on " + dev);
  this->ExpectError([&] { (void)Tn::where(a, a, a); }, kInvalid,
                    "where: condition must be bool, got f32[2,3] on " + dev);
  const std::vector<Tn> parts = {a, b.reshape({1, 4})};
  this->ExpectError([&] { (void)Tn::cat(parts, 0); }, kInvalid,
                    "cat along dim 0: tensor 1 is f32[1,4] on " + dev + " but tensor 0 is f32[2,3] on " + dev +
                        "; they must match in dtype and in every other dim");
}

TYPED_TEST(Errors, DifferentDevicesAreRejected) {
  using Tn = typename TestFixture::Tn;
  KILN_SKIP_IF_FEWER_DEVICES(TypeParam, 2);
  const auto second = TestDevices<TypeParam>::Second();
  const Tn a = Tn::ones({2});
  const Tn b = Tn::ones({2}, DType::kF32, second);
  this->ExpectError([&] { (void)(a - b); }, kInvalid,
                    "sub: operands are on different devices: f32[2] on " + a.device().ToString() + " and f32[2] on " +
                        second.ToString() + "; move one with .to(device)");
  // Moving it fixes it.
  EXPECT_EQ((a - b.to(a.device())).to_data().ToDoubles(), (std::vector<double>{0, 0}));
  EXPECT_EQ(a.to(second).device(), second);
  this->ExpectError([&] { (void)Tn::zeros({1}, DType::kF32, TestDevices<TypeParam>::Missing()); }, kInvalid,
                    TestDevices<TypeParam>::MissingMessage());
}

TYPED_TEST(Errors, DimsOutOfRange) {
  using Tn = typename TestFixture::Tn;
  const Tn a = Tn::zeros({2, 3});
  this->ExpectError([&] { (void)a.sum({2}); }, kRange,
                    "sum: dim 2 is out of range for shape [2,3] (rank 2; valid dims are -2..1)");
  this->ExpectError([&] { (void)a.softmax(-3); }, kRange,
                    "softmax: dim -3 is out of range for shape [2,3] (rank 2; valid dims are -2..1)");
  this->ExpectError([&] { (void)a.transpose(0, 5); }, kRange,
                    "transpose: dim 5 is out of range for shape [2,3] (rank 2; valid dims are -2..1)");
  this->ExpectError([&] { (void)a.sum({1, -1}); }, kInvalid, "sum: dims [1,-1] name dim 1 twice (shape [2,3])");
  this->ExpectError(
      [&] {
        (void)a.permute({0, 0});
      },
      kInvalid, "permute: [0,0] names dim 0 twice (f32[2,3] on " + a.device().ToString() + ")");
  this->ExpectError([&] { (void)a.squeeze(0); }, kInvalid,
                    "squeeze: dim 0 of f32[2,3] on " + a.device().ToString() + " has size 2, not 1");
  this->ExpectError([&] { (void)Tn::zeros({0}).max(); }, kInvalid,
                    "max: dim 0 of f32[0] on " + a.device().ToString() + " is empty; there is no max of nothing");
}

TYPED_TEST(Errors, ShapesAndReshapes) {
  using Tn = typename TestFixture::Tn;
  const Tn a = Tn::zeros({2, 3});
  this->ExpectError(
      [&] {
        (void)a.reshape({4, 2});
      },
      kInvalid, "reshape of [2,3] (6 elements) to [4,2] (8 elements): counts differ");
  this->ExpectError(
      [&] {
        (void)a.reshape({-1, 4});
      },
      kInvalid, "reshape of [2,3] (6 elements) to [-1,4]: the -1 cannot be inferred");
  this->ExpectError(
      [&] {
        (void)a.reshape({-1, -1});
      },
      kInvalid, "reshape of [2,3] to [-1,-1]: only one dim may be -1");
  this->ExpectError([&] { (void)Tn::zeros({2, -3}); }, kInvalid, "shape [2,-3] has a negative dimension");
  this->ExpectError(
      [&] {
        (void)a.expand(Shape{4, 3});
      },
      kInvalid, "expand: f32[2,3] on " + a.device().ToString() + " cannot be broadcast to [4,3]");
  this->ExpectError([&] { (void)a.template item<float>(); }, kInvalid,
                    "item: f32[2,3] on " + a.device().ToString() + " has 6 elements, not 1");
}

TYPED_TEST(Errors, IndicesAreChecked) {
  using Tn = typename TestFixture::Tn;
  const std::string dev = typename TypeParam::Device().ToString();
  const Tn a = Tn::zeros({2, 3});
  const Tn bad = Tn::from_vector(std::vector<int64_t>{0, 3}, {1, 2});
  this->ExpectError([&] { (void)a.gather(1, bad); }, kRange,
                    "gather: index 3 at position 1 is out of range [0, 3) for source shape [2,3]");
  this->ExpectError([&] { (void)a.index_select(0, Tn::from_vector(std::vector<int32_t>{-1}, {1})); }, kRange,
                    "index_select: index -1 at position 0 is out of range [0, 2) for source shape [2,3]");
  this->ExpectError(
      [&] { (void)a.gather(1, a); }, kInvalid,
      "gather: index must be an integer tensor, got f32[2,3] on " + dev + " (source f32[2,3] on " + dev + ")");
  this->ExpectError(
      [&] {
        (void)a.gather(0, Tn::zeros({1, 4}, DType::kI64));
      },
      kInvalid,
      "gather: index i64[1,4] on " + dev + " must have the rank of f32[2,3] on " + dev +
          " and be no larger in any dim but 0");
  this->ExpectError([&] { (void)Tn::arange(4).one_hot(3); }, kRange,
                    "one_hot: class id 3 is outside [0, 3) in i64[4] on " + dev);
  this->ExpectError([&] { (void)a.one_hot(3); }, kInvalid, "one_hot: needs integer class ids, got f32[2,3] on " + dev);
}

TYPED_TEST(Errors, DTypeRules) {
  using Tn = typename TestFixture::Tn;
  const std::string dev = typename TypeParam::Device().ToString();
  const Tn i = Tn::arange(3);
  const Tn b = i.gt(0);
  this->ExpectError([&] { (void)i.exp(); }, kInvalid,
                    "exp: needs a floating dtype, got i64[3] on " + dev + "; convert with .to(DType::kF32)");
  this->ExpectError(
      [&] { (void)(b + b); }, kInvalid,
      "add: arithmetic on bool tensors (bool[3] on " + dev + " and bool[3] on " + dev + "); convert with .to(DType)");
  this->ExpectError([&] { (void)(i * 0.5); }, kInvalid,
                    "mul: scalar 0.5 is not a whole number but the tensor is i64[3] on " + dev +
                        "; convert the tensor with .to(DType::kF32)");
  this->ExpectError([&] { (void)i.pow(2); }, kInvalid,
                    "pow: needs a floating dtype, got i64[3] on " + dev + " and i64[] on " + dev);
  this->ExpectError([&] { (void)Tn::zeros({2}).clamp(1, 0); }, kInvalid,
                    "clamp: low 1 is greater than high 0 (tensor f32[2] on " + dev + ")");
  this->ExpectError([&] { (void)Tn::arange(0, 1, 0); }, kInvalid,
                    "arange(0, 1, 0): bounds and step must be finite, step non-zero");
  Generator gen(1);
  this->ExpectError([&] { (void)Tn::uniform({2}, 0, 1, gen, DType::kI32); }, kInvalid,
                    "uniform: dtype i32 is not floating; use f32, f64, bf16 or f16");
  this->ExpectError([&] { (void)i.to_data().template values<float>(); }, kInvalid,
                    "TensorData: elements of a i64[3] tensor read as f32");
}

}  // namespace
}  // namespace kiln::testing
