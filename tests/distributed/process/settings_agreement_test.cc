// Ranks compare the settings that change the math before they train: a difference is the same
// InvalidArgument on every rank, naming the setting and both values. Ranks are threads here.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>

#include "absl/strings/str_cat.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/process/lead_decision.h"
#include "distributed/process/settings_agreement.h"

namespace kiln::distributed {
namespace {

int groups = 0;  // each group its own store

// Runs `call` on `world` ranks (threads) of a fresh process group; each rank's result.
template <class Result>
std::vector<Result> OnRanks(int world, const std::function<Result(ProcessGroup&)>& call) {
  const std::string store = absl::StrCat("file://", std::getenv("TEST_TMPDIR"), "/settings-", groups++);
  std::vector<std::future<Result>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r]() -> Result {
      auto group = GlooProcessGroup::Connect({.rank = r,
                                              .world_size = world,
                                              .rendezvous = store,
                                              .run_id = "settings",
                                              .host = "127.0.0.1",
                                              .timeout = std::chrono::milliseconds(20000)});
      if (!group.ok()) return group.status();
      return call(**group);
    }));
  }
  std::vector<Result> out;
  for (auto& r : ranks) out.push_back(r.get());
  return out;
}

// AgreeOnSettings on as many ranks as `settings` has entries, rank r with settings[r].
std::vector<absl::Status> Agree(const std::vector<Settings>& settings) {
  return OnRanks<absl::Status>(static_cast<int>(settings.size()),
                               [&](ProcessGroup& group) { return AgreeOnSettings(group, settings[group.rank()]); });
}

const Settings kBase = {{"--batch_size", "64"}, {"--lr", "0.050000000000000003"}, {"--optimizer", "sgd"}};

TEST(SettingsAgreement, SameSettingsAgree) {
  for (const absl::Status& s : Agree({kBase, kBase, kBase})) EXPECT_TRUE(s.ok()) << s;
}

TEST(SettingsAgreement, EveryRankNamesTheSameDifference) {
  Settings other = kBase;
  other[0].second = "32";
  other[2].second = "adamw";
  for (const absl::Status& s : Agree({kBase, kBase, other})) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(),
              "ranks disagree on the run's settings: rank 2 has --batch_size=32 but rank 0 has "
              "--batch_size=64; rank 2 has --optimizer=adamw but rank 0 has --optimizer=sgd; start every "
              "rank with the same flags");
  }
}

TEST(SettingsAgreement, MissingSettingsAndLongValuesAreCompared) {
  Settings fewer = {kBase[0], kBase[1]};
  for (const absl::Status& s : Agree({kBase, fewer})) {
    EXPECT_EQ(s.message(),
              "ranks disagree on the run's settings: rank 0 has --optimizer=sgd but rank 1 has no "
              "--optimizer; start every rank with the same flags");
  }
  // Values that differ only past what a message shows still differ.
  Settings a = {{"--data", std::string(500, 'x') + "a"}}, b = {{"--data", std::string(500, 'x') + "b"}};
  for (const absl::Status& s : Agree({a, b})) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_LT(s.message().size(), 400u);
  }
}

// Only rank 0 decides; every rank gets its value, or its error with the same code and message.
TEST(LeadDecision, EveryRankGetsRankZerosValueOrError) {
  std::atomic<int> decisions = 0;
  for (const auto& got : OnRanks<absl::StatusOr<std::string>>(3, [&](ProcessGroup& group) {
         return DecidedByLead(&group, [&]() -> absl::StatusOr<std::string> {
           ++decisions;
           return absl::StrCat("decided by rank ", group.rank(), std::string(5000, '.'));
         });
       })) {
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, "decided by rank 0" + std::string(5000, '.'));
  }
  EXPECT_EQ(decisions, 1);
  for (const auto& got : OnRanks<absl::StatusOr<std::string>>(2, [&](ProcessGroup& group) {
         return DecidedByLead(&group,
                              [] { return absl::StatusOr<std::string>(absl::FailedPreconditionError("busy")); });
       })) {
    EXPECT_EQ(got.status(), absl::FailedPreconditionError("busy"));
  }
  // An empty decision, and a single process without a group.
  for (const auto& got : OnRanks<absl::StatusOr<std::string>>(2, [](ProcessGroup& group) {
         return DecidedByLead(&group, [] { return absl::StatusOr<std::string>(""); });
       })) {
    EXPECT_EQ(got.value_or("error"), "");
  }
  EXPECT_EQ(DecidedByLead(nullptr, [] { return absl::StatusOr<std::string>("alone"); }).value_or(""), "alone");
}

}  // namespace
}  // namespace kiln::distributed
