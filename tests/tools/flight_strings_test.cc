// FlightStrings: a text kept once (equal texts, equal ids), texts intact across the first
// chunk's growth and past the first 1 MiB chunk, and the bound on a text's length.
#include "tools/flight_strings.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln::tools {
namespace {

TEST(FlightStrings, EqualTextsHaveEqualIds) {
  FlightStrings strings;
  const uint32_t a = *strings.Intern("all_reduce(sum)");
  const uint32_t empty = *strings.Intern("");
  EXPECT_NE(a, empty);
  EXPECT_EQ(*strings.Intern("all_reduce(sum)"), a);
  EXPECT_EQ(*strings.Intern(""), empty);
  EXPECT_EQ(strings.Get(a), "all_reduce(sum)");
  EXPECT_EQ(strings.Get(empty), "");
}

TEST(FlightStrings, TextsSurviveGrowthAndNewChunks) {
  FlightStrings strings;
  std::vector<uint32_t> ids;
  // 3 MiB of distinct texts of 1 to 3,000 bytes: the first chunk doubles from 4 KiB, then
  // more chunks follow.
  size_t total = 0;
  for (int i = 0; total < (3 << 20); ++i) {
    const std::string text = absl::StrCat(i, std::string(i % 3000, 'x'));
    total += text.size();
    ids.push_back(*strings.Intern(text));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    ASSERT_EQ(strings.Get(ids[i]), absl::StrCat(i, std::string(i % 3000, 'x'))) << i;
    ASSERT_EQ(*strings.Intern(absl::StrCat(i, std::string(i % 3000, 'x'))), ids[i]) << i;
  }
  EXPECT_GT(ids.back(), uint32_t{2} << 20);
  const std::string longest(FlightStrings::kMaxText, 'y');
  EXPECT_EQ(strings.Get(*strings.Intern(longest)), longest);
  EXPECT_EQ(strings.Intern(longest + "y").status(), absl::InvalidArgumentError("a text of more than 65535 bytes"));
}

}  // namespace
}  // namespace kiln::tools
