// A member's job that throws is that member's status, whatever it throws: an exception that
// escaped a member's thread would abort the program (std::terminate) instead of ending the run
// with a message. Member 0 runs on the caller's thread with autodiff recording on; every other
// member on a thread of its own that lives from one Run to the next.
#include "distributed/member_threads.h"

#include <gtest/gtest.h>

#include <mutex>
#include <new>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "autodiff/grad_mode.h"
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

TEST(MemberThreads, MemberZeroRunsOnTheCallerTheOthersOnThreadsOfTheirOwn) {
  MemberThreads threads(3);
  std::vector<std::thread::id> first(3), second(3);
  std::vector<char> recording(3);  // not vector<bool>: its elements share words, which threads race on
  {
    NoGradScope caller_off;  // member 0 records anyway, as a thread of its own would
    for (std::vector<std::thread::id>* ids : {&first, &second}) {
      ASSERT_TRUE(threads
                      .Run([&](int member) {
                        (*ids)[member] = std::this_thread::get_id();
                        recording[member] = GradEnabled();
                        return absl::OkStatus();
                      })
                      .ok());
    }
    EXPECT_FALSE(GradEnabled());  // the caller's mode is back
  }
  EXPECT_EQ(first[0], std::this_thread::get_id());
  EXPECT_EQ(std::set<std::thread::id>(first.begin(), first.end()).size(), 3u);
  EXPECT_EQ(first, second);  // the same threads every Run
  EXPECT_EQ(recording, std::vector<char>(3, 1));
}

TEST(MemberThreads, OneMemberRunsOnTheCallerAlone) {
  MemberThreads threads(1);
  std::thread::id ran;
  EXPECT_EQ(threads.Run([&](int) -> absl::Status {
    ran = std::this_thread::get_id();
    throw std::runtime_error("odd");
  }),
            absl::InternalError("member 0: odd"));
  EXPECT_EQ(ran, std::this_thread::get_id());
}

}  // namespace
}  // namespace kiln::distributed
