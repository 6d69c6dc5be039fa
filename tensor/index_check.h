// Index values (gather, index_select, scatter_add) are user data: every backend checks them all
// before anything is read or written through one, and reports the first bad one in the same
// words, so an error reads the same on every device.
#ifndef KILN_TENSOR_INDEX_CHECK_H_
#define KILN_TENSOR_INDEX_CHECK_H_

#include <cstdint>

#include "tensor/shape.h"

namespace kiln {

// Throws OutOfRange for the index `value` at `position` (row-major, in the index tensor) that
// is outside [0, size); `what` names the op, `source` the shape it indexes.
[[noreturn]] void ThrowIndexOutOfRange(const char* what, int64_t value, int64_t position, int64_t size,
                                       const Shape& source);

// Checks `count` host values (the index in row-major order); throws as above for the first
// outside [0, size).
void CheckIndexValues(const int64_t* values, int64_t count, int64_t size, const char* what, const Shape& source);

}  // namespace kiln

#endif  // KILN_TENSOR_INDEX_CHECK_H_
