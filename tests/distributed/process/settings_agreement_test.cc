// Ranks compare the settings that change the math before they train: a difference is the same
// InvalidArgument on every rank, naming the setting and both values. Ranks are threads here.
#include <gtest/gtest.h>

#include <future>

#include "absl/strings/str_cat.h"
#include "distributed/gloo/gloo_process_group.h"
#include "distributed/process/settings_agreement.h"

namespace kiln::distributed {
namespace {

// Runs AgreeOnSettings on `settings.size()` ranks of a fresh process group; each rank's status.
std::vector<absl::Status> Agree(const std::vector<Settings>& settings) {
  static int serial = 0;
  const std::string store = absl::StrCat("file://", std::getenv("TEST_TMPDIR"), "/settings-", serial++);
  const int world = static_cast<int>(settings.size());
  std::vector<std::future<absl::Status>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r]() -> absl::Status {
      auto group = GlooProcessGroup::Connect({.rank = r,
                                              .world_size = world,
                                              .rendezvous = store,
                                              .run_id = "settings",
                                              .host = "127.0.0.1",
                                              .timeout = std::chrono::milliseconds(20000)});
      if (!group.ok()) return group.status();
      return AgreeOnSettings(**group, settings[r]);
    }));
  }
  std::vector<absl::Status> out;
  for (auto& r : ranks) out.push_back(r.get());
  return out;
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

}  // namespace
}  // namespace kiln::distributed
