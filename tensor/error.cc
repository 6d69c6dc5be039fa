#include "tensor/error.h"

namespace kiln {

Error::Error(absl::Status status) : status_(std::move(status)), what_(status_.ToString()) {}

void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw Error(status);
}

}  // namespace kiln
