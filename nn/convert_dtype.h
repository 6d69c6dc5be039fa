// Host-side conversion between floating dtypes, for loading a checkpoint into a model of
// another precision (LoadOptions::convert_dtype). Done on TensorData rather than by a
// backend's cast so that it is the same on every backend, including those that have no half
// kernels, and happens before anything in the model changes.
#ifndef KILN_NN_CONVERT_DTYPE_H_
#define KILN_NN_CONVERT_DTYPE_H_

#include "tensor/tensor_data.h"

namespace kiln::nn {

// Whether ConvertDType converts between these: both floating (f64, f32, bf16, f16). Integers
// and bools are never converted, since a file with one where a float is expected is the
// wrong file, not a lower precision.
inline bool CanConvertDType(DType from, DType to) { return IsFloating(from) && IsFloating(to); }

// `data` as `to`, with kiln's rounding: narrowing rounds to nearest even (f64 -> bf16/f16
// once, not through f32 twice), widening is exact, NaN stays NaN and infinities stay
// infinite. Throws InvalidArgument unless CanConvertDType(data.dtype(), to).
TensorData ConvertDType(const TensorData& data, DType to);

}  // namespace kiln::nn

#endif  // KILN_NN_CONVERT_DTYPE_H_
