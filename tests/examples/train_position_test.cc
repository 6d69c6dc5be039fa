// A run's position in its checkpoint's metadata: written and read back exactly; every value
// read from a file checked, errors naming the file and the key; another run's settings refused
// naming the setting.
#include "examples/train_position.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

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

}  // namespace
}  // namespace kiln
