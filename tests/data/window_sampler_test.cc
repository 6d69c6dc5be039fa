// The window order against plain enumeration: each epoch a permutation of every window, a
// batch split over members without overlap, and a position that resumes exactly.
#include "data/window_sampler.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace kiln::data {
namespace {

TEST(WindowSamplerTest, EveryEpochVisitsEveryWindowOnce) {
  for (int64_t tokens : {3, 17, 101, 1000, 4097}) {
    const auto sampler = WindowSampler::Create(tokens, 2, 7);
    ASSERT_TRUE(sampler.ok());
    const int64_t windows = (tokens - 1) / 2;
    ASSERT_EQ(sampler->windows(), windows);
    for (int64_t epoch : {0, 1, 5}) {
      std::set<int64_t> starts;
      int64_t in_place = 0;
      for (int64_t k = 0; k < windows; ++k) {
        const int64_t s = sampler->Start(epoch, k);
        EXPECT_EQ(s % 2, 0);
        EXPECT_GE(s, 0);
        EXPECT_LE(s + 3, tokens);  // the window's context + 1 tokens lie in the stream
        starts.insert(s);
        in_place += s == 2 * k;
      }
      EXPECT_EQ(static_cast<int64_t>(starts.size()), windows) << tokens << " tokens, epoch " << epoch;
      if (windows >= 100) EXPECT_LT(in_place, windows / 10) << "not shuffled";
    }
  }
}

TEST(WindowSamplerTest, OrderDependsOnSeedAndEpoch) {
  const auto a = WindowSampler::Create(10001, 10, 1), b = WindowSampler::Create(10001, 10, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  int same_seed = 0, other_seed = 0, other_epoch = 0;
  for (int64_t k = 0; k < a->windows(); ++k) {
    same_seed += a->Start(0, k) == WindowSampler::Create(10001, 10, 1)->Start(0, k);
    other_seed += a->Start(0, k) == b->Start(0, k);
    other_epoch += a->Start(0, k) == a->Start(1, k);
  }
  EXPECT_EQ(same_seed, a->windows());
  EXPECT_LT(other_seed, 20);
  EXPECT_LT(other_epoch, 20);
}

// Batches of 7 over 3 members for two epochs of 20 windows: each member's rows (DataParallel's
// split) are disjoint from every other member's, and together they are each epoch's windows.
TEST(WindowSamplerTest, MembersShareAnEpochWithoutOverlap) {
  const auto sampler = WindowSampler::Create(41, 2, 3);
  ASSERT_TRUE(sampler.ok());
  ASSERT_EQ(sampler->windows(), 20);
  const int members = 3;
  std::vector<std::vector<int64_t>> seen(members);
  SamplerPosition at;
  for (int step = 0; step < 40 / 7; ++step) {  // 35 windows: all of epoch 0, 15 of epoch 1
    const std::vector<int64_t> batch = sampler->Next(7, at);
    for (int g = 0; g < members; ++g) {
      const auto [begin, end] = MemberRows(7, g, members);
      for (int64_t r = begin; r < end; ++r) seen[g].push_back(batch[r]);
    }
  }
  EXPECT_EQ(at, (SamplerPosition{.epoch = 1, .drawn = 15}));
  std::vector<int64_t> all;
  for (const auto& member : seen) all.insert(all.end(), member.begin(), member.end());
  ASSERT_EQ(all.size(), 35u);
  // The first 20 draws in the members' order are epoch 0: each window once.
  std::vector<int64_t> order;
  SamplerPosition again;
  for (int step = 0; step < 5; ++step) {
    for (int64_t s : sampler->Next(7, again)) order.push_back(s);
  }
  std::set<int64_t> epoch0(order.begin(), order.begin() + 20), epoch1(order.begin() + 20, order.end());
  EXPECT_EQ(epoch0.size(), 20u);
  EXPECT_EQ(epoch1.size(), 15u);
  std::multiset<int64_t> by_members(all.begin(), all.end()), by_order(order.begin(), order.end());
  EXPECT_EQ(by_members, by_order);
  EXPECT_EQ(MemberRows(7, 0, 3), (std::pair<int64_t, int64_t>{0, 2}));
  EXPECT_EQ(MemberRows(7, 2, 3), (std::pair<int64_t, int64_t>{4, 7}));
}

TEST(WindowSamplerTest, APositionResumesExactly) {
  const auto sampler = WindowSampler::Create(1000, 8, 11);
  ASSERT_TRUE(sampler.ok());
  SamplerPosition straight;
  std::vector<int64_t> uninterrupted;
  for (int step = 0; step < 60; ++step) {
    for (int64_t s : sampler->Next(5, straight)) uninterrupted.push_back(s);
    EXPECT_EQ(straight, sampler->After(step + 1, 5)) << step;
  }
  for (int stop : {1, 24, 25, 37}) {  // 124 windows an epoch: 25 batches end one mid-batch
    SamplerPosition saved = sampler->After(stop, 5);
    std::vector<int64_t> resumed(uninterrupted.begin(), uninterrupted.begin() + 5 * stop);
    for (int step = stop; step < 60; ++step) {
      for (int64_t s : sampler->Next(5, saved)) resumed.push_back(s);
    }
    EXPECT_EQ(resumed, uninterrupted) << "stopped after " << stop;
  }
  EXPECT_EQ(sampler->After(0, 5), SamplerPosition{});
}

TEST(WindowSamplerTest, TooFewTokensIsAnError) {
  EXPECT_EQ(WindowSampler::Create(64, 64, 1).status().message(),
            "64 tokens are too few for windows of --context=64 (65 tokens each)");
  EXPECT_TRUE(WindowSampler::Create(65, 64, 1).ok());
}

}  // namespace
}  // namespace kiln::data
