// A member's job that throws is that member's status, whatever it throws: an exception that
// escaped a member's thread would abort the program (std::terminate) instead of ending the run
// with a message.
#include "distributed/member_threads.h"

#include <gtest/gtest.h>

#include <new>
#include <stdexcept>

#include "tensor/error.h"

namespace kiln::distributed {
namespace {

TEST(MemberThreads, WhatAJobThrowsIsItsStatus) {
  MemberThreads threads(3);
  EXPECT_TRUE(threads.Run([](int) { return absl::OkStatus(); }).ok());
  const absl::Status oom = threads.Run([](int member) -> absl::Status {
    if (member == 1) throw std::bad_alloc();
    return absl::OkStatus();
  });
  EXPECT_EQ(oom, absl::ResourceExhaustedError(
                     "member 1 ran out of memory (std::bad_alloc): make the model or the batch smaller"));
  EXPECT_EQ(threads.Run([](int member) -> absl::Status {
    if (member == 2) throw std::runtime_error("odd");
    return absl::OkStatus();
  }),
            absl::InternalError("member 2: odd"));
  EXPECT_EQ(threads.Run([](int) -> absl::Status { ThrowInvalidArgument("bad %d", 7); }).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(threads.Run([](int) { return absl::OkStatus(); }).ok());  // the threads live on
}

}  // namespace
}  // namespace kiln::distributed
