#include "tensor/index_check.h"

#include "tensor/error.h"

namespace kiln {

void ThrowIndexOutOfRange(const char* what, int64_t value, int64_t position, int64_t size, const Shape& source) {
  ThrowOutOfRange("%s: index %d at position %d is out of range [0, %d) for source shape %s", what, value, position,
                  size, source.ToString());
}

void CheckIndexValues(const int64_t* values, int64_t count, int64_t size, const char* what, const Shape& source) {
  for (int64_t i = 0; i < count; ++i) {
    if (values[i] < 0 || values[i] >= size) ThrowIndexOutOfRange(what, values[i], i, size, source);
  }
}

}  // namespace kiln
