// A run's position in its checkpoint's metadata: written and read back exactly; every value
// read from a file checked, errors naming the file and the key; another run's settings refused
// naming the setting.
#include "examples/train_position.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "absl/strings/match.h"
#include "tensor/random.h"

namespace kiln {
namespace {

const distributed::Settings kSettings = {{"--model", "mlp"}, {"--batch_size", "64"}};

TrainPosition Sample() {
  TrainPosition p;
  p.step = 1234;
  p.epoch = 3;
  p.step_in_epoch = 17;
  p.data_generator = std::numeric_limits<uint64_t>::max();
  p.loss_sum = 0.1 + 0.2;  // not exact in decimal: must come back bit for bit
  p.last_epoch_loss = 1.0 / 3;
  p.members = 4;
  p.devices = "cpu:0,cpu:1 x 2 processes";
  p.generators = {0, 42, std::numeric_limits<uint64_t>::max()};
  return p;
}

TEST(TrainPosition, RoundTripsExactly) {
  const TrainPosition p = Sample();
  auto q = ParsePosition(PositionMetadata(p, kSettings), kSettings, "ck");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->step, p.step);
  EXPECT_EQ(q->epoch, p.epoch);
  EXPECT_EQ(q->step_in_epoch, p.step_in_epoch);
  EXPECT_EQ(q->data_generator, p.data_generator);
  EXPECT_EQ(q->loss_sum, p.loss_sum);
  EXPECT_EQ(q->last_epoch_loss, p.last_epoch_loss);
  EXPECT_EQ(q->members, p.members);
  EXPECT_EQ(q->devices, p.devices);
  EXPECT_EQ(q->generators, p.generators);
  TrainPosition none;
  auto r = ParsePosition(PositionMetadata(none, kSettings), kSettings, "ck");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->generators.empty());
}

// A token dataset's window order (gpt --train_data) is kept only by runs that have one, so
// checkpoints of the other runs read back as before.
TEST(TrainPosition, KeepsATokenDatasetsPosition) {
  TrainPosition p = Sample();
  EXPECT_FALSE(PositionMetadata(p, kSettings).contains("data_epoch"));
  p.has_data_position = true;
  p.data_epoch = 3;
  p.data_drawn = 9007199254740992;
  const auto m = PositionMetadata(p, kSettings);
  EXPECT_EQ(m.at("data_epoch"), "3");
  EXPECT_EQ(m.at("data_drawn"), "9007199254740992");
  auto q = ParsePosition(m, kSettings, "ck");
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_TRUE(q->has_data_position);
  EXPECT_EQ(q->data_epoch, 3);
  EXPECT_EQ(q->data_drawn, 9007199254740992);
  auto bad = m;
  bad["data_drawn"] = "-1";
  EXPECT_EQ(ParsePosition(bad, kSettings, "ck").status().message(),
            "ck: the training state's data_drawn is \"-1\", not a whole number from 0 to 9007199254740992");
  bad.erase("data_drawn");
  EXPECT_EQ(ParsePosition(bad, kSettings, "ck").status().message(), "ck: the training state has no data_drawn");
  EXPECT_FALSE(ParsePosition(PositionMetadata(Sample(), kSettings), kSettings, "ck")->has_data_position);
}

TEST(TrainPosition, RefusesAnotherRunsSettings) {
  const auto m = PositionMetadata(Sample(), kSettings);
  EXPECT_EQ(ParsePosition(m, {{"--model", "mlp"}, {"--batch_size", "128"}}, "ck").status().message(),
            "ck was written by a run with --batch_size=64; this run has --batch_size=128");
  EXPECT_EQ(ParsePosition(m, {{"--model", "mlp"}, {"--seed", "1"}}, "ck").status().message(),
            "ck does not say which --seed it was written with");
}

TEST(TrainPosition, ChecksEveryValue) {
  struct Case {
    const char* key;
    const char* value;
    const char* message;
  };
  const Case cases[] = {
      {"step", "-1", "ck: the training state's step is \"-1\", not a whole number from 0 to 9007199254740992"},
      {"step", "1e3", "ck: the training state's step is \"1e3\", not a whole number from 0 to 9007199254740992"},
      {"step", " 12", "ck: the training state's step is \" 12\", not a whole number from 0 to 9007199254740992"},
      {"data_generator", "18446744073709551616",
       "ck: the training state's data_generator is \"18446744073709551616\", not a whole number from 0 to "
       "18446744073709551615"},
      {"loss_sum", "nan", "ck: the training state's loss_sum is \"nan\", not a finite number"},
      {"members", "0",
       "ck: the training state's position (step 1234, epoch 3, step 17 of it, 0 members) is impossible"},
      {"epoch", "0", "ck: the training state's position (step 1234, epoch 0, step 17 of it, 4 members) is impossible"},
      {"step_in_epoch", "2000",
       "ck: the training state's position (step 1234, epoch 3, step 2000 of it, 4 members) is impossible"},
      {"generators", "1,,2", "ck: the training state's generators is \"\", not a list of whole numbers"},
      {"generators", "1,x", "ck: the training state's generators is \"x\", not a list of whole numbers"},
  };
  for (const Case& c : cases) {
    auto m = PositionMetadata(Sample(), kSettings);
    m[c.key] = c.value;
    EXPECT_EQ(ParsePosition(m, kSettings, "ck").status().message(), c.message) << c.key << "=" << c.value;
  }
  auto m = PositionMetadata(Sample(), kSettings);
  m.erase("loss_sum");
  EXPECT_EQ(ParsePosition(m, kSettings, "ck").status().message(), "ck: the training state has no loss_sum");
}

// Rules of a train-like run: 10 or 11 steps an epoch, 3 epochs, an epoch's end written as the
// next epoch at step 0, 99 data draws as each epoch begins.
PositionRules TrainRules() {
  return {.min_steps_per_epoch = 10,
          .max_steps_per_epoch = 11,
          .epochs = 3,
          .next_epoch_at_end = true,
          .first_data_generator = 5,
          .draws_per_epoch = 99};
}

// Where a run with TrainRules stands after `epochs_done` whole epochs of 10 steps and `in` more.
TrainPosition TrainAt(int64_t epochs_done, int64_t in) {
  TrainPosition p;
  p.epoch = epochs_done + 1;
  p.step_in_epoch = in;
  p.step = epochs_done * 10 + in;
  Generator g(5);
  g.Skip(99 * epochs_done);
  p.data_generator = g.state();
  return p;
}

TEST(CheckPosition, AcceptsWhatTheWriterWrites) {
  for (int64_t epochs_done : {0, 1, 2}) {
    for (int64_t in : {0, 3, 10, 11}) {
      TrainPosition p = TrainAt(epochs_done, in);
      EXPECT_TRUE(CheckPosition(p, p.step, TrainRules(), "ck").ok()) << epochs_done << " " << in;
    }
  }
  const TrainPosition end = TrainAt(3, 0);  // after the last epoch
  EXPECT_TRUE(CheckPosition(end, end.step, TrainRules(), "ck").ok());
  // A gpt-like run: one epoch of 100 steps, 16 draws a step.
  const PositionRules gpt{
      .min_steps_per_epoch = 100, .max_steps_per_epoch = 100, .first_data_generator = 9, .draws_per_step = 16};
  TrainPosition p;
  p.step = p.step_in_epoch = 40;
  Generator g(9);
  g.Skip(40 * 16);
  p.data_generator = g.state();
  EXPECT_TRUE(CheckPosition(p, 40, gpt, "ck").ok());
  p.step = p.step_in_epoch = 140;  // a longer run's checkpoint: beyond --steps
  g.Skip(100 * 16);
  p.data_generator = g.state();
  EXPECT_EQ(CheckPosition(p, 140, gpt, "ck").message(),
            "ck: the training state's position (step 140, epoch 1, step 140 of it) is past the epoch's 100 steps; no "
            "run with this run's settings writes that");
}

TEST(CheckPosition, RefusesWhatNoRunWithTheseSettingsWrites) {
  const auto check = [](TrainPosition p, int64_t optimizer_steps) {
    return std::string(CheckPosition(p, optimizer_steps, TrainRules(), "ck").message());
  };
  const std::string at = "ck: the training state's position ";
  const std::string tail = "; no run with this run's settings writes that";
  TrainPosition p = TrainAt(1, 4);
  p.step_in_epoch = 12;
  p.step = 22;
  EXPECT_EQ(check(p, 22), at + "(step 22, epoch 2, step 12 of it) is past the epoch's 11 steps" + tail);
  p = TrainAt(3, 0);
  p.epoch = 5;
  EXPECT_EQ(check(p, p.step), at + "(step 30, epoch 5, step 0 of it) has an epoch outside 1..3" + tail);
  p = TrainAt(3, 0);
  p.step_in_epoch = 2;
  p.step = 32;
  EXPECT_EQ(check(p, 32), at + "(step 32, epoch 4, step 2 of it) goes on past the last epoch" + tail);
  p = TrainAt(2, 5);
  p.step = 99;
  EXPECT_EQ(check(p, 99), at +
                              "(step 99, epoch 3, step 5 of it) does not add up: 2 whole epochs of 10-11 steps came "
                              "before" +
                              tail);
  p = TrainAt(2, 5);
  p.data_generator += 1;
  EXPECT_TRUE(
      absl::StartsWith(check(p, p.step), at + "(step 25, epoch 3, step 5 of it) has a data order generator at "))
      << check(p, p.step);
  p = TrainAt(2, 5);
  EXPECT_EQ(check(p, 26), at + "(step 25, epoch 3, step 5 of it) has an optimizer that made 26 steps" + tail);
  EXPECT_EQ(check(p, 24), at + "(step 25, epoch 3, step 5 of it) has an optimizer that made 24 steps" + tail);
  p.has_loss_scale = true;
  p.loss_scale = 65536;
  EXPECT_EQ(check(p, 25), at + "(step 25, epoch 3, step 5 of it) has a loss scale, but this run scales no loss" + tail);
}

// With loss scaling: skipped steps do not step the optimizer; the scale must be one the scaler
// reaches in the steps made, and it must be there.
TEST(CheckPosition, TheLossScaleMustBeThereAndReachable) {
  const nn::LossScaler scaler({.growth_interval = 4});
  PositionRules rules = TrainRules();
  rules.loss_scaler = &scaler;
  TrainPosition p = TrainAt(1, 0);  // 10 steps
  EXPECT_EQ(CheckPosition(p, 10, rules, "ck").message(),
            "ck: the training state's position (step 10, epoch 2, step 0 of it) has no loss scale, but this run scales "
            "its loss; no run with this run's settings writes that");
  p.has_loss_scale = true;
  for (double reachable : {65536.0, 65536.0 / 8, 65536.0 * 4, 65536.0 * 2 / 4}) {
    p.loss_scale = reachable;
    EXPECT_TRUE(CheckPosition(p, 7, rules, "ck").ok()) << reachable;
  }
  p.loss_scale_good_steps = 2;
  p.loss_scale = 65536.0 * 4;  // two growths need 8 good steps, and 2 more since: 10
  EXPECT_TRUE(CheckPosition(p, 10, rules, "ck").ok());
  for (double unreachable : {65536.0 * 8, 65536.0 / 4096, 3.0, 1e-310, 1.7e308}) {
    p.loss_scale = unreachable;
    const std::string message(CheckPosition(p, 10, rules, "ck").message());
    EXPECT_TRUE(absl::StrContains(message, "which the loss scaler does not reach in 10 steps")) << unreachable;
  }
}

}  // namespace
}  // namespace kiln
