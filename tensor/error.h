// kiln::Error: what tensor math throws on bad input. It carries an absl::Status so callers
// can branch on the code and show the message, which names the operands involved.
#ifndef KILN_TENSOR_ERROR_H_
#define KILN_TENSOR_ERROR_H_

#include <exception>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace kiln {

class Error : public std::exception {
 public:
  explicit Error(absl::Status status);
  const absl::Status& status() const { return status_; }
  absl::StatusCode code() const { return status_.code(); }
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  absl::Status status_;
  std::string what_;
};

// Throws kiln::Error(InvalidArgument) with a formatted message.
template <class... Args>
[[noreturn]] void ThrowInvalidArgument(const absl::FormatSpec<Args...>& format, const Args&... args) {
  throw Error(absl::InvalidArgumentError(absl::StrFormat(format, args...)));
}

template <class... Args>
[[noreturn]] void ThrowOutOfRange(const absl::FormatSpec<Args...>& format, const Args&... args) {
  throw Error(absl::OutOfRangeError(absl::StrFormat(format, args...)));
}

// Turns a non-OK status from a boundary API into a kiln::Error.
void ThrowIfError(const absl::Status& status);

}  // namespace kiln

#endif  // KILN_TENSOR_ERROR_H_
