// The element-wise and reduction operations a backend implements, as enums: a backend
// switches once per call (never per element), and Autodiff<B> knows each op's derivative.
#ifndef KILN_TENSOR_OPS_H_
#define KILN_TENSOR_OPS_H_

namespace kiln {

enum class UnaryOp { kNeg, kAbs, kExp, kLog, kSqrt, kTanh, kSigmoid, kRelu, kErf };

// Arithmetic ops keep the operands' dtype; comparisons give bool.
enum class BinaryOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  kEq,
  kNe,
  kLt,
  kLe,
  kGt,
  kGe,
};

enum class ReduceOp { kSum, kMean, kMax, kMin };

const char* OpName(UnaryOp op);
const char* OpName(BinaryOp op);
const char* OpName(ReduceOp op);

inline bool IsComparison(BinaryOp op) { return op >= BinaryOp::kEq; }
// Ops defined only for floating dtypes.
inline bool NeedsFloating(UnaryOp op) { return op != UnaryOp::kNeg && op != UnaryOp::kAbs && op != UnaryOp::kRelu; }

}  // namespace kiln

#endif  // KILN_TENSOR_OPS_H_
