// examples/train's command line: the strict parser and the checks of every value, with the
// exact messages a user sees (after "train: ", with exit status 2).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/flags/reflection.h"
#include "examples/command_line.h"
#include "examples/train_flags.h"

namespace kiln {
namespace {

// The message for args, from parsing or from the checks; "" when both pass.
std::string Error(const std::vector<std::string>& args) {
  absl::FlagSaver restore;
  const auto parsed = ParseCommandLineStrictly(args);
  if (!parsed.ok()) return std::string(parsed.status().message());
  const auto config = TrainConfigFromFlags();
  return config.ok() ? "" : std::string(config.status().message());
}

TrainConfig Config(const std::vector<std::string>& args) {
  absl::FlagSaver restore;
  EXPECT_TRUE(ParseCommandLineStrictly(args).ok());
  return TrainConfigFromFlags().value();
}

TEST(TrainFlags, BothValueFormsAndBooleans) {
  EXPECT_EQ(Config({"--batch_size", "32", "--model=cnn"}).batch_size, 32);
  EXPECT_EQ(Config({"-batch_size=16"}).batch_size, 16);
  EXPECT_FALSE(Config({"--nocosine"}).cosine);
  EXPECT_FALSE(Config({"--cosine=false"}).cosine);
  EXPECT_TRUE(Config({"--nocosine", "--cosine"}).cosine);
  EXPECT_EQ(Config({"--optimizer=adamw"}).lr, 0.001);  // the optimizer's default
}

TEST(TrainFlags, WhatAbseilWouldMisreadIsAnError) {
  EXPECT_EQ(Error({"--batch_size"}), "--batch_size: --batch_size needs a value (--batch_size=64)");
  EXPECT_EQ(Error({"--nomodel"}), "--nomodel: --model is not a true/false flag; give it a value (--model=...)");
  EXPECT_EQ(Error({"--flagfile=/etc/passwd"}),
            "--flagfile=/etc/passwd: --flagfile is not supported; give every flag on the command line");
  EXPECT_EQ(Error({"--fromenv=lr"}), "--fromenv=lr: --fromenv is not supported; give every flag on the command line");
  EXPECT_EQ(Error({"64"}), "64: unexpected argument; this program takes flags only (--name=value)");
  EXPECT_EQ(Error({"--", "extra"}), "extra: unexpected argument; this program takes flags only");
  EXPECT_EQ(Error({"--modle=mlp"}), "--modle=mlp: unknown flag --modle; see --help");
  EXPECT_EQ(Error({"--epochs=three"}), "--epochs=three: Illegal value 'three' specified for flag 'epochs'");
  EXPECT_EQ(Error({"--cosine=maybe"}), "--cosine=maybe: Illegal value 'maybe' specified for flag 'cosine'");
  EXPECT_LT(Error({std::string(100000, 'x')}).size(), 200u);  // quoted arguments are cut
  EXPECT_EQ(Error({"--\x01\xff"}), "--\\x01\\xff: unknown flag --\\x01\\xff; see --help");
}

TEST(TrainFlags, NonFiniteAndOutOfRangeNumbersAreRefused) {
  EXPECT_EQ(Error({"--lr=nan"}), "--lr=nan: expected a learning rate in [0, 1000] (0: the optimizer's default)");
  EXPECT_EQ(Error({"--lr=inf"}), "--lr=inf: expected a learning rate in [0, 1000] (0: the optimizer's default)");
  EXPECT_EQ(Error({"--lr=-1"}), "--lr=-1: expected a learning rate in [0, 1000] (0: the optimizer's default)");
  EXPECT_EQ(Error({"--weight_decay=nan"}), "--weight_decay=nan: expected a weight decay in [0, 1000]");
  EXPECT_EQ(Error({"--weight_decay=inf"}), "--weight_decay=inf: expected a weight decay in [0, 1000]");
  EXPECT_EQ(Error({"--collective_timeout=inf"}),
            "--collective_timeout=inf: --collective_timeout must be > 0 seconds and at most 604800 (a week)");
  EXPECT_EQ(Error({"--collective_timeout=1e300"}),
            "--collective_timeout=1.0000000000000001e+300: --collective_timeout must be > 0 seconds and at most "
            "604800 (a week)");
  EXPECT_EQ(Error({"--collective_timeout=nan"}),
            "--collective_timeout=nan: --collective_timeout must be > 0 seconds and at most 604800 (a week)");
  EXPECT_EQ(Error({"--batch_size=0"}), "--batch_size=0: --batch_size must be >= 1 (and at most 1048576)");
  EXPECT_EQ(Error({"--threads=5000"}), "--threads=5000: expected 0..1024 (0: fair share)");
  EXPECT_EQ(Error({"--epochs=-1"}), "--epochs=-1: expected 0..100000 (0: the default)");
}

TEST(TrainFlags, CheckpointsAndResuming) {
  EXPECT_EQ(Error({"--checkpoint_every=-1"}), "--checkpoint_every=-1: expected 0..2^40 steps");
  EXPECT_EQ(Error({"--checkpoint_every=10"}), "--checkpoint_every=10: needs --checkpoint_dir");
  EXPECT_EQ(Error({"--keep_checkpoints=0", "--checkpoint_dir=ck"}), "--keep_checkpoints=0: expected 1..1000000");
  EXPECT_EQ(Error({"--resume=latest"}), "--resume=latest: needs --checkpoint_dir");
  const TrainConfig c = Config({"--checkpoint_dir=ck", "--checkpoint_every=100", "--resume=latest"});
  EXPECT_EQ(c.checkpoints.dir, "ck");
  EXPECT_EQ(c.checkpoints.every, 100);
  EXPECT_EQ(c.checkpoints.keep, 3);
  EXPECT_EQ(c.checkpoints.resume, "latest");
  EXPECT_EQ(Config({"--resume=ck/step-000000000100"}).checkpoints.resume, "ck/step-000000000100");
}

TEST(TrainFlags, PrecisionAndGradientSync) {
  EXPECT_EQ(Error({"--precision=fp16"}), "--precision=fp16: expected f32, bf16 or f16");
  EXPECT_EQ(Error({"--grad_sync=f16"}), "--grad_sync=f16: expected f32 or bf16");
  const TrainConfig c = Config({"--precision=f16", "--grad_sync=bf16"});
  EXPECT_EQ(c.precision.precision, nn::Precision::kF16);
  EXPECT_TRUE(c.precision.loss_scaling());
  EXPECT_EQ(c.precision.grad_sync, DType::kBF16);
  const TrainConfig plain = Config({});
  EXPECT_EQ(plain.precision.precision, nn::Precision::kF32);
  EXPECT_FALSE(plain.precision.loss_scaling());
  EXPECT_EQ(plain.precision.grad_sync, std::nullopt);
  // Both are part of what a resumed run and every rank must agree on.
  const auto settings = MathSettings(c);
  EXPECT_EQ(settings[settings.size() - 2], (std::pair<std::string, std::string>{"--precision", "f16"}));
  EXPECT_EQ(settings.back(), (std::pair<std::string, std::string>{"--grad_sync", "bf16"}));
}

TEST(TrainFlags, HelpIsNotARun) {
  absl::FlagSaver restore;
  EXPECT_EQ(ParseCommandLineStrictly({"--lr=nan", "--help"}).value(), CommandLine::kHelp);
  const std::string usage = Usage("train", "Trains.");
  EXPECT_NE(usage.find("  --batch_size  images per step, over every device of every process (default: 64)"),
            std::string::npos)
      << usage;
  EXPECT_EQ(usage.find("flagfile"), std::string::npos) << usage;
}

}  // namespace
}  // namespace kiln
