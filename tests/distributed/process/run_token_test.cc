// The run token's HMAC against RFC 4231's test vectors, the constant-time comparison, the
// kernel's random bytes, and the default token against an HMAC computed elsewhere (Python's
// hmac module).
#include "distributed/process/run_token.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/string_view.h"

namespace kiln::distributed {
namespace {

std::string Hex(const Mac& mac) {
  return absl::BytesToHexString(absl::string_view(reinterpret_cast<const char*>(mac.data()), mac.size()));
}

TEST(RunToken, HmacMatchesRfc4231) {
  // Test cases 1, 2 and 6: a short key, a key shorter than the data, a key longer than a block.
  EXPECT_EQ(Hex(Hmac(std::string(20, '\x0b'), "Hi There")),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(Hex(Hmac("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(Hex(Hmac(std::string(131, '\xaa'), "Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(RunToken, SameMacComparesEveryByte) {
  const Mac a = Hmac("key", "message");
  EXPECT_TRUE(SameMac(a, Hmac("key", "message")));
  for (size_t i : {size_t{0}, size_t{17}, a.size() - 1}) {
    Mac b = a;
    b[i] ^= 1;
    EXPECT_FALSE(SameMac(a, b)) << "byte " << i;
  }
}

TEST(RunToken, DefaultTokenIsTheHmacOfRunIdAndAddress) {
  const std::string token = DefaultRunToken("run-7", "file:///tmp/store");
  EXPECT_EQ(token, "f6500c17e18ef9ca79f4f3a9d8372481d06714f97403e14610ac1ee1709dd2a7");
  EXPECT_NE(DefaultRunToken("run-8", "file:///tmp/store"), token);
  EXPECT_NE(DefaultRunToken("run-7", "file:///tmp/other"), token);
}

TEST(RunToken, RandomBytesFillsTheWholeBuffer) {
  // 4 KiB twice: equal, or all zero, only if the source were broken (odds 2^-32768).
  std::string a(4096, '\0'), b(4096, '\0');
  ASSERT_TRUE(RandomBytes(a.data(), a.size()));
  ASSERT_TRUE(RandomBytes(b.data(), b.size()));
  EXPECT_NE(a, b);
  EXPECT_NE(a.find_last_not_of('\0'), std::string::npos);
  EXPECT_NE(a.substr(2048).find_first_not_of('\0'), std::string::npos);  // the second half too
}

}  // namespace
}  // namespace kiln::distributed
