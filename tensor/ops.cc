#include "tensor/ops.h"

namespace kiln {

const char* OpName(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg: return "neg";
    case UnaryOp::kAbs: return "abs";
    case UnaryOp::kExp: return "exp";
    case UnaryOp::kLog: return "log";
    case UnaryOp::kSqrt: return "sqrt";
    case UnaryOp::kTanh: return "tanh";
    case UnaryOp::kSigmoid: return "sigmoid";
    case UnaryOp::kRelu: return "relu";
    case UnaryOp::kErf: return "erf";
  }
  return "?";
}

const char* OpName(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd: return "add";
    case BinaryOp::kSub: return "sub";
    case BinaryOp::kMul: return "mul";
    case BinaryOp::kDiv: return "div";
    case BinaryOp::kPow: return "pow";
    case BinaryOp::kMaximum: return "maximum";
    case BinaryOp::kMinimum: return "minimum";
    case BinaryOp::kEq: return "eq";
    case BinaryOp::kNe: return "ne";
    case BinaryOp::kLt: return "lt";
    case BinaryOp::kLe: return "le";
    case BinaryOp::kGt: return "gt";
    case BinaryOp::kGe: return "ge";
  }
  return "?";
}

const char* OpName(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kMean: return "mean";
    case ReduceOp::kMax: return "max";
    case ReduceOp::kMin: return "min";
  }
  return "?";
}

}  // namespace kiln
