#include <cstdint>

#include "gtest/gtest.h"
#include "tensor/random.h"

namespace kiln {
namespace {

TEST(Generator, SkipLandsWhereThatManyDrawsLand) {
  for (uint64_t seed : {uint64_t{0}, uint64_t{7}, ~uint64_t{0}}) {
    for (uint64_t draws : {0, 1, 2, 63, 1000}) {
      Generator drawn(seed), skipped(seed);
      for (uint64_t i = 0; i < draws; ++i) drawn.NextU64();
      skipped.Skip(draws);
      EXPECT_EQ(skipped.state(), drawn.state()) << seed << " " << draws;
      EXPECT_EQ(skipped.NextU64(), drawn.NextU64());
    }
  }
}

}  // namespace
}  // namespace kiln
