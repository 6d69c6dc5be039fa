#include "tensor/crc32c.h"

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace kiln {
namespace {

// Check values from RFC 3720 (iSCSI), appendix B.4, and the common "123456789" check value.
TEST(Crc32c, MatchesPublishedCheckValues) {
  EXPECT_EQ(Crc32c(0, "123456789"), 0xE3069283u);
  EXPECT_EQ(Crc32c(0, std::string(32, '\0')), 0x8A9136AAu);
  EXPECT_EQ(Crc32c(0, std::string(32, '\xFF')), 0x62A8AB43u);
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(static_cast<char>(i));
    descending.push_back(static_cast<char>(31 - i));
  }
  EXPECT_EQ(Crc32c(0, ascending), 0x46DD794Eu);
  EXPECT_EQ(Crc32c(0, descending), 0x113FDB5Cu);
  EXPECT_EQ(Crc32cPortable(0, "123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c(0, ""), 0u);
}

// Every length and alignment around the 8-byte steps, both paths, and chaining in two parts.
TEST(Crc32c, PathsAgreeAtEveryLengthOffsetAndSplit) {
  std::vector<unsigned char> bytes(300);
  uint32_t x = 12345;
  for (auto& b : bytes) b = static_cast<unsigned char>((x = x * 1103515245 + 12345) >> 16);
  for (size_t offset = 0; offset < 8; ++offset) {
    for (size_t n = 0; offset + n <= bytes.size(); n += (n < 40 ? 1 : 37)) {
      const uint32_t whole = Crc32c(0, bytes.data() + offset, n);
      ASSERT_EQ(whole, Crc32cPortable(0, bytes.data() + offset, n)) << offset << " " << n;
      for (size_t split : {size_t{0}, n / 3, n}) {
        const uint32_t first = Crc32c(0, bytes.data() + offset, split);
        ASSERT_EQ(Crc32c(first, bytes.data() + offset + split, n - split), whole) << offset << " " << n;
      }
    }
  }
}

TEST(Crc32c, OneFlippedBitChangesIt) {
  std::string text(4096, 'k');
  const uint32_t clean = Crc32c(0, text);
  for (size_t i = 0; i < text.size(); i += 511) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = text;
      damaged[i] = static_cast<char>(damaged[i] ^ (1 << bit));
      ASSERT_NE(Crc32c(0, damaged), clean) << i << " " << bit;
    }
  }
}

}  // namespace
}  // namespace kiln
