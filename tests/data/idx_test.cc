// The IDX reader on files it writes itself (plain and gzip'd, good and damaged), and on the
// Fashion-MNIST files Debian installs.
#include "data/idx.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/data/hostile_files.h"

namespace kiln::data {
namespace {

std::string Idx(std::vector<int> dims, const std::string& payload, int type = 0x08) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (int d : dims) {
    s += static_cast<char>(d >> 24);
    s += static_cast<char>(d >> 16);
    s += static_cast<char>(d >> 8);
    s += static_cast<char>(d);
  }
  return s + payload;
}

class IdxTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes, bool gzip) {
    const std::string path = ::testing::TempDir() + "/" + name;
    if (gzip) {
      gzFile f = gzopen(path.c_str(), "wb");
      gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size()));
      gzclose(f);
    } else {
      std::ofstream(path, std::ios::binary) << bytes;
    }
    return path;
  }
};

TEST_F(IdxTest, ReadsPlainAndGzipFiles) {
  const std::string bytes = Idx({2, 3}, std::string("\x01\x02\x03\x04\x05\xff", 6));
  for (bool gzip : {false, true}) {
    const auto data = ReadIdx(Write(gzip ? "a.gz" : "a", bytes, gzip));
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(data->shape(), Shape({2, 3}));
    EXPECT_EQ(data->ToDoubles(), (std::vector<double>{1, 2, 3, 4, 5, 255}));
  }
}

TEST_F(IdxTest, DamagedFilesNameTheProblem) {
  const std::string dir = ::testing::TempDir();
  auto error = [&](const std::string& name, const std::string& bytes) {
    return ReadIdx(Write(name, bytes, true)).status();
  };
  absl::Status s = error("short", Idx({4}, "\x01\x02"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(s.message(), dir + "/short is not a valid IDX file: 2 of 4 data bytes (truncated)");
  EXPECT_EQ(error("magic", Idx({1}, "\x01", 0x0D)).message(),
            dir + "/magic is not a valid IDX file: magic 00000d01 is not an unsigned-byte IDX file");
  EXPECT_EQ(error("trailing", Idx({1}, "\x01\x02")).message(),
            dir + "/trailing is not a valid IDX file: trailing bytes after the data");
  EXPECT_EQ(error("empty", "").message(), dir + "/empty is not a valid IDX file: shorter than its 4-byte magic number");
  EXPECT_EQ(error("zero", Idx({0}, "")).message(), dir + "/zero is not a valid IDX file: dimension 0 has size 0");
  EXPECT_EQ(ReadIdx(dir + "/missing").status().code(), absl::StatusCode::kNotFound);
}

// A header's claim is believed only as far as the file backs it: a few bytes claiming 2^31
// images' worth fail at once, having allocated about what the file holds.
TEST_F(IdxTest, HugeClaimsFailFastWithinAFileSizedBudget) {
  const std::string tiny = Idx({32768, 256, 256}, "0123456789");            // 2^31 bytes claimed
  const std::string mnist = Idx({60000, 28, 28}, std::string(19, '\x07'));  // 35 bytes
  for (bool gzip : {false, true}) {
    for (const auto& [name, bytes, count] :
         {std::tuple{"tiny", tiny, 2147483648LL}, std::tuple{"mnist", mnist, 47040000LL}}) {
      const std::string path = Write(absl::StrCat(name, gzip ? ".gz" : ""), bytes, gzip);
      const auto start = std::chrono::steady_clock::now();
      absl::Status s;
      {
        // Raw: the file's size settles it. Gzip: one chunk of output buffer at most.
        kiln::testing::AllocationBudget budget(gzip ? 4 << 20 : 64 << 10);
        s = ReadIdx(path).status();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
      EXPECT_EQ(s.message(), absl::StrFormat("%s is not a valid IDX file: %d of %d data bytes (truncated)", path,
                                             bytes.size() - 16, count))
          << s;
    }
  }
}

TEST_F(IdxTest, RunningOutOfMemoryIsAStatus) {
  const std::string path = Write("big.gz", Idx({8, 1024, 1024}, std::string(8 << 20, '\x01')), true);
  absl::Status s;
  {
    kiln::testing::AllocationBudget budget(4 << 20);  // half the data
    s = ReadIdx(path).status();
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), "not enough memory to read " + path);
}

TEST_F(IdxTest, UncompressedFilesAreSizedByTheFile) {
  const std::string dir = ::testing::TempDir();
  EXPECT_EQ(ReadIdx(Write("raw_short", Idx({4}, "\x01\x02"), false)).status().message(),
            dir + "/raw_short is not a valid IDX file: 2 of 4 data bytes (truncated)");
  EXPECT_EQ(ReadIdx(Write("raw_long", Idx({1}, "\x01\x02"), false)).status().message(),
            dir + "/raw_long is not a valid IDX file: trailing bytes after the data");
}

TEST_F(IdxTest, OnlyRegularFilesAreRead) {
  const std::string dir = ::testing::TempDir() + "/idx_dir";
  std::filesystem::create_directories(dir);
  absl::Status s = ReadIdx(dir).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), dir + " is not a regular file (it is a directory)");

  const std::string fifo = ::testing::TempDir() + "/idx_fifo";
  EXPECT_TRUE(kiln::testing::ReturnsWithoutAWriter(fifo, [&](const std::string& path) { s = ReadIdx(path).status(); }))
      << "ReadIdx waited for a writer on a FIFO";
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), fifo + " is not a regular file (it is a FIFO, socket or device)");
}

TEST(FashionMnist, LoadsDebiansFiles) {
  const auto train = LoadFashionMnist(kFashionMnistDir, "train");
  ASSERT_TRUE(train.ok()) << train.status() << " (./bazelw installs dataset-fashion-mnist)";
  EXPECT_EQ(train->images.shape(), Shape({60000, 28, 28}));
  EXPECT_EQ(train->labels.shape(), Shape({60000}));
  EXPECT_EQ(train->labels.values<int64_t>()[0], 9);  // the first image is an ankle boot
  // Standardised: mean about 0 and standard deviation about 1 over the training set.
  double sum = 0, sq = 0;
  for (float v : train->images.values<float>()) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double n = 60000.0 * 784, mean = sum / n;
  EXPECT_NEAR(mean, 0, 0.01);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 1, 0.01);
  const auto test = LoadFashionMnist(kFashionMnistDir, "t10k");
  ASSERT_TRUE(test.ok());
  EXPECT_EQ(test->labels.shape(), Shape({10000}));
  EXPECT_EQ(LoadFashionMnist(kFashionMnistDir, "valid").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace kiln::data
