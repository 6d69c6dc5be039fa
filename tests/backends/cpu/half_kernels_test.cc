// The CPU kernels that convert half tensors in bulk (backends/cpu/half_convert.h) give what one
// scalar conversion per element gives: native bf16/f16 binary ops over every operand layout
// (dense, broadcast value, broadcast row and column, transposed, streamed), casts from and to
// f32 (dense, strided, transposed), a half copied to its own type bit for bit, and the host
// reductions of the collectives; the same bits on 1, 2 and 3 threads. The fused kernels that
// widen half operands block by block (backends/cpu/half_blocks.h) give what the f32 kernel gives
// on the whole widened tensors, rounded once (tensor/half_in_f32.h), bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/cpu/collective_kernels.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_device.h"
#include "tensor/half_in_f32.h"

namespace kiln {
namespace {

using T = Tensor<Cpu>;

// Half the values random bit patterns (NaNs, infinities, subnormals), half near 1 so that
// sums and products round in every way.
template <class H>
std::vector<H> Values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> near_one(-4.0f, 4.0f);
  std::vector<H> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = i % 2 ? H::FromBits(static_cast<uint16_t>(gen())) : H(near_one(gen));
  return v;
}

std::vector<float> RandomFloats(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = std::bit_cast<float>(static_cast<uint32_t>(gen()));
  return v;
}

// Equal bits, or both NaN: the payload of a NaN produced by arithmetic depends on the operand
// order the compiler picks, which is not the conversion's business.
template <class H>
bool Same(H got, H want) {
  const float g = static_cast<float>(got), w = static_cast<float>(want);
  return got.bits == want.bits || (std::isnan(g) && std::isnan(w));
}
bool Same(bool got, bool want) { return got == want; }

float NanMax(float a, float b) { return std::isnan(a) || std::isnan(b) ? a + b : (a > b ? a : b); }
float NanMin(float a, float b) { return std::isnan(a) || std::isnan(b) ? a + b : (a < b ? a : b); }

struct Op {
  BinaryOp op;
  std::function<float(float, float)> arithmetic;  // empty for a comparison
  std::function<bool(float, float)> compare;
};
const std::vector<Op>& Ops() {
  static const std::vector<Op> ops = {
      {BinaryOp::kAdd, std::plus<float>(), {}},
      {BinaryOp::kSub, std::minus<float>(), {}},
      {BinaryOp::kMul, std::multiplies<float>(), {}},
      {BinaryOp::kDiv, std::divides<float>(), {}},
      {BinaryOp::kMaximum, NanMax, {}},
      {BinaryOp::kMinimum, NanMin, {}},
      {BinaryOp::kEq, {}, std::equal_to<float>()},
      {BinaryOp::kNe, {}, std::not_equal_to<float>()},
      {BinaryOp::kLt, {}, std::less<float>()},
      {BinaryOp::kLe, {}, std::less_equal<float>()},
      {BinaryOp::kGt, {}, std::greater<float>()},
      {BinaryOp::kGe, {}, std::greater_equal<float>()},
  };
  return ops;
}

void UseThreads(int threads) { ASSERT_TRUE(cpu::Configure({.devices = 1, .threads_per_device = threads}).ok()); }

// a op b against the per-element reference on one thread, and the same bytes on 2 and 3;
// `ref_a(i)` and `ref_b(i)` give the operands of output element i.
template <class H, class A, class B>
void ExpectBinary(const Op& op, const T& a, const T& b, A ref_a, B ref_b) {
  const auto where = [&] {
    return absl::StrCat(OpName(op.op), " ", DTypeName(a.dtype()), a.shape().ToString(), " with ", b.shape().ToString());
  };
  UseThreads(1);
  const TensorData first = a.binary(op.op, b).to_data();
  const auto check = [&](auto got, auto want_of) {
    for (int64_t i = 0; i < first.numel(); ++i) {
      const float x = static_cast<float>(ref_a(i)), y = static_cast<float>(ref_b(i));
      ASSERT_TRUE(Same(got[i], want_of(x, y))) << where() << " at " << i << " of " << x << ", " << y;
    }
  };
  if (op.arithmetic) {
    check(first.values<H>(), [&](float x, float y) { return H(op.arithmetic(x, y)); });
  } else {
    check(first.values<bool>(), op.compare);
  }
  for (int threads : {2, 3}) {
    UseThreads(threads);
    const TensorData out = a.binary(op.op, b).to_data();
    ASSERT_EQ(std::memcmp(out.raw(), first.raw(), first.nbytes()), 0)
        << where() << " differs on " << threads << " threads";
  }
}

template <class H>
class HalfKernelsTest : public testing::Test {
 protected:
  void TearDown() override { UseThreads(2); }
};
using HalfTypes = testing::Types<BFloat16, Float16>;
TYPED_TEST_SUITE(HalfKernelsTest, HalfTypes);

TYPED_TEST(HalfKernelsTest, BinaryOpsOnEveryLayout) {
  using H = TypeParam;
  constexpr int64_t kRows = 259, kCols = 131;  // 33,929 elements: more than one parallel chunk
  constexpr int64_t kN = kRows * kCols;
  const std::vector<H> va = Values<H>(kN, 1), vb = Values<H>(kN, 2);
  const std::vector<H> row(vb.begin(), vb.begin() + kCols), column(vb.begin(), vb.begin() + kRows);
  const T a = T::from_vector(va, {kRows, kCols}), b = T::from_vector(vb, {kRows, kCols});
  const T one = T::from_vector(std::vector<H>{vb[5]}, {});
  // a's values stored column-major: at(i) is element i of the row-major [kRows, kCols] view.
  std::vector<H> vt(kN);
  for (int64_t r = 0; r < kRows; ++r) {
    for (int64_t c = 0; c < kCols; ++c) vt[c * kRows + r] = va[r * kCols + c];
  }
  const T a_transposed = T::from_vector(vt, {kCols, kRows}).transpose(0, 1);
  const auto at_a = [&](int64_t i) { return va[i]; };
  const auto at_b = [&](int64_t i) { return vb[i]; };
  for (const Op& op : Ops()) {
    ExpectBinary<H>(op, a, b, at_a, at_b);
    ExpectBinary<H>(op, a, one, at_a, [&](int64_t) { return vb[5]; });
    ExpectBinary<H>(
        op, one, a, [&](int64_t) { return vb[5]; }, at_a);
    ExpectBinary<H>(op, a, T::from_vector(row, {kCols}), at_a, [&](int64_t i) { return row[i % kCols]; });
    ExpectBinary<H>(op, a, T::from_vector(column, {kRows, 1}), at_a, [&](int64_t i) { return column[i / kCols]; });
    ExpectBinary<H>(op, a_transposed, b, at_a, at_b);
    ExpectBinary<H>(op, b, a_transposed, at_b, at_a);
    if (testing::Test::HasFatalFailure()) return;
  }
}

// An output of 16 MiB and more is written with streaming stores, block by block.
TYPED_TEST(HalfKernelsTest, StreamedBinaryOps) {
  using H = TypeParam;
  const int64_t n = (int64_t{1} << 23) + 13;
  const std::vector<H> va = Values<H>(n, 3), vb = Values<H>(n, 4);
  const T a = T::from_vector(va, {n}), b = T::from_vector(vb, {n});
  for (const Op& op : {Ops()[0], Ops()[4]}) {  // add, maximum (a bool output of 8M is not streamed)
    ExpectBinary<H>(
        op, a, b, [&](int64_t i) { return va[i]; }, [&](int64_t i) { return vb[i]; });
  }
}

template <class H>
void ExpectCastsTo(const T& from, DType to, const std::function<uint32_t(int64_t)>& want) {
  for (int threads : {1, 2, 3}) {
    UseThreads(threads);
    const TensorData out = from.to(to).to_data();
    for (int64_t i = 0; i < out.numel(); ++i) {
      const uint32_t got = to == DType::kF32 ? std::bit_cast<uint32_t>(out.values<float>()[i])
                                             : static_cast<uint32_t>(out.values<H>()[i].bits);
      ASSERT_EQ(got, want(i)) << DTypeName(from.dtype()) << from.shape().ToString() << " to " << DTypeName(to) << " at "
                              << i << " on " << threads << " threads";
    }
  }
}

TYPED_TEST(HalfKernelsTest, CastsFromAndToF32OnEveryLayout) {
  using H = TypeParam;
  constexpr int64_t kRows = 301, kCols = 229;
  const std::vector<float> f = RandomFloats(kRows * kCols, 5);
  const std::vector<H> h = Values<H>(kRows * kCols, 6);
  const auto narrow = [&](int64_t i) { return static_cast<uint32_t>(H(f[i]).bits); };
  const auto widen = [&](int64_t i) { return std::bit_cast<uint32_t>(static_cast<float>(h[i])); };
  const DType half = DTypeOf<H>();
  ExpectCastsTo<H>(T::from_vector(f, {kRows * kCols}), half, narrow);
  ExpectCastsTo<H>(T::from_vector(h, {kRows * kCols}), DType::kF32, widen);
  // Every other column: inner stride 2.
  const int64_t half_cols = (kCols + 1) / 2;
  const auto every_other = [&](auto of) {
    return [=](int64_t i) { return of(i / half_cols * kCols + i % half_cols * 2); };
  };
  ExpectCastsTo<H>(T::from_vector(f, {kRows, kCols}).slice(1, 0, kCols, 2), half, every_other(narrow));
  ExpectCastsTo<H>(T::from_vector(h, {kRows, kCols}).slice(1, 0, kCols, 2), DType::kF32, every_other(widen));
  // Transposed: element (r, c) of the view is element (c, r) of the [kCols, kRows] storage.
  const auto transposed = [&](auto of) { return [=](int64_t i) { return of(i % kCols * kRows + i / kCols); }; };
  ExpectCastsTo<H>(T::from_vector(f, {kCols, kRows}).transpose(0, 1), half, transposed(narrow));
  ExpectCastsTo<H>(T::from_vector(h, {kCols, kRows}).transpose(0, 1), DType::kF32, transposed(widen));
}

// A copy to the same dtype changes no bit: a signalling NaN is not quieted (CUDA copies the
// same way, backends/cuda/kernels/common.cuh).
TYPED_TEST(HalfKernelsTest, CopyKeepsEveryBit) {
  using H = TypeParam;
  std::vector<H> v(65536);
  for (size_t i = 0; i < v.size(); ++i) v[i] = H::FromBits(static_cast<uint16_t>(i));
  const T t = T::from_vector(v, {256, 256}).transpose(0, 1).reshape({65536});  // a copy
  const TensorData data = t.to_data();
  const auto got = data.values<H>();
  for (int64_t r = 0; r < 256; ++r) {
    for (int64_t c = 0; c < 256; ++c) ASSERT_EQ(got[r * 256 + c].bits, v[c * 256 + r].bits) << r << ", " << c;
  }
}

TYPED_TEST(HalfKernelsTest, HostReductions) {
  using H = TypeParam;
  constexpr int64_t kN = 1500, kBegin = 7, kEnd = 1403;  // more than one block, none aligned
  const std::vector<std::vector<H>> members = {Values<H>(kN, 7), Values<H>(kN, 8), Values<H>(kN, 9)};
  const std::vector<const void*> inputs = {members[0].data(), members[1].data(), members[2].data()};
  for (const ReduceOp kind : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
    std::vector<H> out(kN, H::FromBits(0x1234));
    ReduceOnHost(kind, DTypeOf<H>(), inputs, out.data(), kBegin, kEnd);
    for (int64_t i = 0; i < kN; ++i) {
      if (i < kBegin || i >= kEnd) {
        ASSERT_EQ(out[i].bits, 0x1234) << "wrote outside [begin, end) at " << i;
        continue;
      }
      float acc = static_cast<float>(members[0][i]);
      for (size_t m = 1; m < members.size(); ++m) {
        const float x = static_cast<float>(members[m][i]);
        if (kind == ReduceOp::kMax) {
          acc = acc != acc || acc > x ? acc : x;
        } else if (kind == ReduceOp::kMin) {
          acc = acc != acc || acc < x ? acc : x;
        } else {
          acc += x;
        }
      }
      if (kind == ReduceOp::kMean) acc /= 3.0f;
      ASSERT_TRUE(Same(out[i], H(acc))) << "reduce op " << static_cast<int>(kind) << " at " << i;
    }
  }
  std::vector<H> data = members[0];
  DivideOnHost(DTypeOf<H>(), data.data(), kBegin, kEnd, 3);
  for (int64_t i = 0; i < kN; ++i) {
    const H want = i < kBegin || i >= kEnd ? members[0][i] : H(static_cast<float>(members[0][i]) / 3.0f);
    ASSERT_TRUE(Same(data[i], want)) << "divide at " << i;
  }
}

// Values in [lo, hi), rounded to H.
template <class H>
T Uniform(const Shape& shape, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<H> v(shape.numel());
  for (auto& x : v) x = H(dist(gen));
  return T::from_vector(v, shape);
}

// `got` and `want` hold the same half values, bit for bit (NaNs: both NaN).
template <class H>
void ExpectSameBits(const Cpu::Primitive& got, const Cpu::Primitive& want, const std::string& what) {
  const TensorData g = T(got).to_data(), w = T(want).to_data();
  ASSERT_EQ(g.dtype(), w.dtype()) << what;
  ASSERT_EQ(g.numel(), w.numel()) << what;
  for (int64_t i = 0; i < g.numel(); ++i) {
    ASSERT_TRUE(Same(g.values<H>()[i], w.values<H>()[i]))
        << what << " at " << i << ": " << static_cast<float>(g.values<H>()[i]) << " against "
        << static_cast<float>(w.values<H>()[i]);
  }
}

// More than one parallel chunk of 16K elements and a partial block of 1,024 at the end.
TYPED_TEST(HalfKernelsTest, GeluEqualsTheF32KernelRoundedOnce) {
  using H = TypeParam;
  const int64_t n = 3 * 16384 + 1037;
  const T x = T::from_vector(Values<H>(n, 10), {n}), gy = T::from_vector(Values<H>(n, 11), {n});
  for (int threads : {1, 2, 3}) {
    UseThreads(threads);
    for (bool tanh : {false, true}) {
      const std::string what = absl::StrCat(tanh ? "tanh" : "erf", " on ", threads, " threads");
      ExpectSameBits<H>(Cpu::gelu(x.primitive(), tanh), HalfInF32<Cpu>::gelu(x.primitive(), tanh), "gelu " + what);
      ExpectSameBits<H>(Cpu::gelu_backward(x.primitive(), gy.primitive(), tanh),
                        HalfInF32<Cpu>::gelu_backward(x.primitive(), gy.primitive(), tanh), "gelu_backward " + what);
    }
  }
}

// One head's scratch per task: several blocks of 64 queries (s = 130), the GPT's head width.
TYPED_TEST(HalfKernelsTest, CausalAttentionEqualsTheF32KernelRoundedOnce) {
  using H = TypeParam;
  struct Case {
    int64_t b, s, heads, hd;
  };
  for (const Case& c : {Case{2, 130, 3, 8}, Case{1, 64, 2, 64}, Case{1, 1, 1, 1}, Case{0, 3, 1, 2}}) {
    const T qkv = Uniform<H>(Shape{c.b, c.s, 3 * c.heads * c.hd}, -2, 2, 12);
    const T gy = Uniform<H>(Shape{c.b, c.s, c.heads * c.hd}, -1, 1, 13);
    for (int threads : {1, 2, 3}) {
      UseThreads(threads);
      const std::string what =
          absl::StrCat("b ", c.b, " s ", c.s, " heads ", c.heads, " hd ", c.hd, " on ", threads, " threads");
      const auto got = Cpu::causal_attention(qkv.primitive(), c.heads);
      const auto want = HalfInF32<Cpu>::causal_attention(qkv.primitive(), c.heads);
      ExpectSameBits<H>(got.y, want.y, "y, " + what);
      ExpectSameBits<H>(got.weights, want.weights, "weights, " + what);
      ExpectSameBits<H>(
          Cpu::causal_attention_backward(qkv.primitive(), want.weights, gy.primitive(), c.heads),
          HalfInF32<Cpu>::causal_attention_backward(qkv.primitive(), want.weights, gy.primitive(), c.heads),
          "backward, " + what);
    }
  }
}

// Long rows split into several blocks of 16K (at offsets that are not 64-byte aligned), columns
// over many rows, several dims, a transposed input, and a small window (HalfInF32 itself).
TYPED_TEST(HalfKernelsTest, ReductionsEqualTheF32KernelRoundedOnce) {
  using H = TypeParam;
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
    bool transpose;
  };
  const std::vector<Case> cases = {{Shape{3, 40001}, {1}, false},      {Shape{2048, 384}, {0}, false},
                                   {Shape{4, 70, 131}, {0, 1}, false}, {Shape{70, 131}, {0}, true},
                                   {Shape{5, 3, 7}, {1}, false},       {Shape{1, 1}, {0, 1}, false}};
  for (const Case& c : cases) {
    const T values = Uniform<H>(c.shape, -3, 3, 14);
    const T x = c.transpose ? values.transpose(0, 1) : values;
    for (const ReduceOp op : {ReduceOp::kSum, ReduceOp::kMean, ReduceOp::kMax, ReduceOp::kMin}) {
      for (int threads : {1, 2, 3}) {
        UseThreads(threads);
        const std::string what = absl::StrCat("reduce ", static_cast<int>(op), " of ", x.shape().ToString(), " over ",
                                              c.dims.size(), " dims on ", threads, " threads");
        ExpectSameBits<H>(Cpu::reduce(op, x.primitive(), c.dims, false),
                          HalfInF32<Cpu>::reduce(op, x.primitive(), c.dims, false), what);
      }
    }
  }
}

}  // namespace
}  // namespace kiln
