#include "tensor/scalar.h"

#include "absl/strings/str_cat.h"

namespace kiln {

std::string Scalar::ToString() const { return is_integer_ ? absl::StrCat(i_) : absl::StrCat(f_); }

}  // namespace kiln
