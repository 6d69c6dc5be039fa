// The safetensors reader on hostile files (sizes that overflow or outgrow the file, ranges
// that overlap, files that are not regular) and the writer against planted links, failed
// writes and unwritable targets.
#include "nn/safetensors.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/data/hostile_files.h"

namespace kiln::nn {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A safetensors file with this header text and `data` after it.
std::string Safetensors(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(static_cast<uint64_t>(header.size()) >> (8 * i));
  return out + header + data;
}

std::set<std::string> Entries(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.insert(e.path().filename().string());
  return names;
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    path_ = (dir_ / "model.safetensors").string();
  }
  // Writes `bytes` to path_ and reads it back under a budget of `budget` allocated bytes.
  absl::Status ReadBytes(const std::string& bytes, size_t budget = 1 << 20) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
    kiln::testing::AllocationBudget limit(budget);
    return ReadSafetensors(path_).status();
  }
  static TensorFile OneTensor(std::vector<float> values) {
    TensorFile file;
    const int64_t n = static_cast<int64_t>(values.size());
    file.tensors.emplace("w", TensorData::FromVector(values, {n}));
    return file;
  }
  fs::path dir_;
  std::string path_;
};

TEST_F(SafetensorsTest, SizesThatOverflowAreRejected) {
  const std::string prefix = path_ + " is not a valid safetensors file: tensor t is ";
  // 2^61 f32 elements are 2^63 bytes: the element count fits in int64, the byte size does not.
  absl::Status s =
      ReadBytes(Safetensors(R"({"t":{"dtype":"F32","shape":[2305843009213693952],"data_offsets":[0,0]}})"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(s.message(), prefix + "f32[2305843009213693952], more bytes than fit in int64");
  // 2^62 f32 elements are 2^64 bytes, which wrap to 0 and would match an empty byte range.
  s = ReadBytes(Safetensors(R"({"t":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})"));
  EXPECT_EQ(s.message(), prefix + "f32[4611686018427387904], more bytes than fit in int64");
  s = ReadBytes(Safetensors(R"({"t":{"dtype":"I64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"));
  EXPECT_EQ(s.message(), prefix + "i64[4294967296,4294967296], more elements than fit in int64");
  // As in Shape, a 0 dim does not excuse the others from fitting...
  s = ReadBytes(Safetensors(R"({"t":{"dtype":"F32","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"));
  EXPECT_EQ(s.message(), prefix + "f32[0,4294967296,4294967296], more elements than fit in int64");
  // ...but an empty tensor with huge dims that do fit is fine.
  std::ofstream(path_, std::ios::binary | std::ios::trunc)
      << Safetensors(R"({"t":{"dtype":"F64","shape":[0,4611686018427387904],"data_offsets":[0,0]}})");
  const auto empty = ReadSafetensors(path_);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->tensors.at("t").shape(), Shape({0, int64_t{1} << 62}));
  // Dims beyond int64 and absurd ranks.
  s = ReadBytes(Safetensors(R"({"t":{"dtype":"F32","shape":[9223372036854775808],"data_offsets":[0,0]}})"));
  EXPECT_NE(s.message().find("tensor t has a bad shape"), std::string_view::npos) << s;
  std::string rank65 = R"({"t":{"dtype":"F32","shape":[1)";
  for (int i = 0; i < 64; ++i) rank65 += ",1";
  s = ReadBytes(Safetensors(rank65 + R"(],"data_offsets":[0,4]}})", "abcd"));
  EXPECT_NE(s.message().find("tensor t has 65 dims, more than kiln's 64"), std::string_view::npos) << s;
}

// What a header claims is compared with the bytes the file holds before anything is allocated.
TEST_F(SafetensorsTest, ClaimsAreCheckedAgainstTheFileBeforeAllocating) {
  // 4 TiB claimed in a file of a few dozen bytes.
  absl::Status s = ReadBytes(
      Safetensors(R"({"t":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]}})", "abcd"));
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_EQ(s.message(), path_ +
                             " is not a valid safetensors file: tensor t: bytes [0, 4398046511104) do not "
                             "hold f32[1099511627776] (4398046511104 bytes) in 4 data bytes (truncated?)");
  // 256 MiB claimed, with a range that says the same: still only 4 bytes in the file.
  s = ReadBytes(Safetensors(R"({"t":{"dtype":"F32","shape":[67108864],"data_offsets":[0,268435456]}})", "abcd"));
  EXPECT_NE(s.message().find("(truncated?)"), std::string_view::npos) << s;
  // Overlapping ranges would let a small file fill memory many times over.
  std::string header = "{";
  for (int i = 0; i < 64; ++i)
    absl::StrAppend(&header, i ? "," : "", R"("t)", i, R"(":{"dtype":"I32","shape":[16384],"data_offsets":[0,65536]})");
  s = ReadBytes(Safetensors(header + "}", std::string(65536, '\0')), 1 << 20);
  EXPECT_EQ(s.message(), path_ + " is not a valid safetensors file: tensor data overlaps or has a gap at byte 65536");
}

TEST_F(SafetensorsTest, ReadsWithinAFileSizedBudget) {
  TensorFile file;
  file.tensors.emplace("a", TensorData(Shape({1024, 256}), DType::kF32));  // 1 MiB
  file.tensors.emplace("b", TensorData(Shape({3}), DType::kBool));
  ASSERT_TRUE(WriteSafetensors(path_, file).ok());
  absl::StatusOr<TensorFile> back;
  {
    kiln::testing::AllocationBudget budget((1 << 20) + (64 << 10));
    back = ReadSafetensors(path_);
  }
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->tensors.at("a").shape(), Shape({1024, 256}));
}

TEST_F(SafetensorsTest, RunningOutOfMemoryIsAStatusNamingTheTensor) {
  TensorFile file;
  file.tensors.emplace("big", TensorData(Shape({1024, 1024}), DType::kF32));  // 4 MiB
  ASSERT_TRUE(WriteSafetensors(path_, file).ok());
  absl::Status s;
  {
    kiln::testing::AllocationBudget budget(1 << 20);
    s = ReadSafetensors(path_).status();
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), path_ + ": not enough memory for tensor big (4194304 bytes)");
}

TEST_F(SafetensorsTest, OnlyRegularFilesAreRead) {
  absl::Status s = ReadSafetensors(dir_.string()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(s.message(), dir_.string() + " is not a regular file (it is a directory)");
  const std::string fifo = (dir_ / "fifo").string();
  EXPECT_TRUE(kiln::testing::ReturnsWithoutAWriter(fifo, [&](const std::string& path) {
    s = ReadSafetensors(path).status();
  })) << "ReadSafetensors waited for a writer on a FIFO";
  EXPECT_EQ(s.message(), fifo + " is not a regular file (it is a FIFO)");
  s = ReadSafetensors("/dev/zero").status();
  EXPECT_EQ(s.message(), "/dev/zero is not a regular file (it is a character device)");
  s = ReadSafetensors((dir_ / "missing").string()).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find((dir_ / "missing").string()), std::string_view::npos) << s;
}

// Links planted at every name the old writer used, or a careless one might, point at a file
// outside; writing must never reach it.
TEST_F(SafetensorsTest, PlantedLinksAreNeverFollowed) {
  const fs::path victim = fs::path(::testing::TempDir()) / "victim_of_planted_link";
  std::ofstream(victim, std::ios::trunc) << "precious";
  const std::string planted[] = {
      absl::StrCat(path_, ".tmp.", getpid()),
      absl::StrCat(path_, ".tmp"),
      absl::StrCat(path_, "~"),
      (dir_ / ".model.safetensors.tmp").string(),
      absl::StrCat(path_, ".tmp.", getpid() + 1),
  };
  for (const std::string& link : planted) fs::create_symlink(victim, link);
  // And a dangling one, which would create a file where its link points.
  const fs::path nowhere = fs::path(::testing::TempDir()) / "created_through_a_link";
  fs::remove(nowhere);
  fs::create_symlink(nowhere, absl::StrCat(path_, ".part"));
  const std::set<std::string> before = Entries(dir_);

  ASSERT_TRUE(WriteSafetensors(path_, OneTensor({1, 2, 3})).ok());
  EXPECT_EQ(Slurp(victim.string()), "precious");
  EXPECT_FALSE(fs::exists(nowhere));
  for (const std::string& link : planted) EXPECT_TRUE(fs::is_symlink(link)) << link;
  std::set<std::string> after = before;
  after.insert("model.safetensors");
  EXPECT_EQ(Entries(dir_), after);  // the new file and nothing else

  // A link at the target itself is replaced by the file, not written through.
  fs::remove(path_);
  fs::create_symlink(victim, path_);
  ASSERT_TRUE(WriteSafetensors(path_, OneTensor({4, 5})).ok());
  EXPECT_FALSE(fs::is_symlink(path_));
  EXPECT_EQ(Slurp(victim.string()), "precious");
  EXPECT_EQ(ReadSafetensors(path_)->tensors.at("w").ToDoubles(), (std::vector<double>{4, 5}));
}

TEST_F(SafetensorsTest, NewFilesAreMode0644BeforeTheUmask) {
  const mode_t old = umask(0);
  const absl::Status s = WriteSafetensors(path_, OneTensor({1}));
  umask(old);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(fs::status(path_).permissions(), fs::perms(0644));
}

TEST_F(SafetensorsTest, AFailedWriteLeavesTheOldFileAsItWas) {
  ASSERT_TRUE(WriteSafetensors(path_, OneTensor({1, 2, 3})).ok());
  const std::string good = Slurp(path_);
  const std::set<std::string> entries = Entries(dir_);

  // A file size limit makes the write fail part way (EFBIG instead of the default SIGXFSZ).
  rlimit saved;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = saved;
  small.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  const absl::Status s = WriteSafetensors(path_, OneTensor(std::vector<float>(100000, 7.0f)));
  setrlimit(RLIMIT_FSIZE, &saved);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange) << s;  // EFBIG
  EXPECT_NE(s.message().find("cannot write"), std::string_view::npos) << s;
  EXPECT_NE(s.message().find(path_), std::string_view::npos) << s;
  EXPECT_EQ(Slurp(path_), good);
  EXPECT_EQ(Entries(dir_), entries);

  // A target that is a directory is refused before anything is written.
  const fs::path sub = dir_ / "sub";
  fs::create_directory(sub);
  const absl::Status d = WriteSafetensors(sub.string(), OneTensor({1}));
  EXPECT_EQ(d.code(), absl::StatusCode::kFailedPrecondition) << d;
  EXPECT_EQ(d.message(), sub.string() + " is a directory, not a file");
  EXPECT_TRUE(fs::is_empty(sub));
  EXPECT_EQ(Slurp(path_), good);
}

TEST_F(SafetensorsTest, NamesMustBeUtf8) {
  TensorFile file = OneTensor({1});
  file.metadata["note"] = "\xff";
  const absl::Status s = WriteSafetensors(path_, file);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("invalid UTF-8 byte"), std::string_view::npos) << s;
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(SafetensorsTest, CheckWritableFindsWhatWouldFailAndLeavesNothing) {
  EXPECT_TRUE(CheckWritable(path_).ok());
  EXPECT_TRUE(fs::is_empty(dir_));  // not even the target
  ASSERT_TRUE(WriteSafetensors(path_, OneTensor({1})).ok());
  const std::string good = Slurp(path_);
  EXPECT_TRUE(CheckWritable(path_).ok());
  EXPECT_EQ(Slurp(path_), good);
  EXPECT_EQ(Entries(dir_), std::set<std::string>{"model.safetensors"});

  const std::string missing = (dir_ / "no/such/dir/model.safetensors").string();
  absl::Status s = CheckWritable(missing);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("cannot create a file in " + (dir_ / "no/such/dir/").string()), std::string_view::npos)
      << s;
  s = CheckWritable(dir_.string());
  EXPECT_EQ(s.message(), dir_.string() + " is a directory, not a file");
  s = CheckWritable(dir_.string() + "/");
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckWritable("").code(), absl::StatusCode::kInvalidArgument);
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  s = CheckWritable(fifo);
  EXPECT_EQ(s.message(), fifo + " is not a regular file (it is a FIFO)");
  s = CheckWritable(path_ + "/x");  // under a regular file
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path_ + "/x"), std::string_view::npos) << s;
  fs::remove(fifo);
  if (geteuid() != 0) {  // root writes anywhere
    const fs::path locked = dir_ / "locked";
    fs::create_directory(locked);
    fs::permissions(locked, fs::perms(0555));
    s = CheckWritable((locked / "model.safetensors").string());
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
    fs::permissions(locked, fs::perms(0755));
  }
  EXPECT_EQ(Entries(dir_), std::set<std::string>{"model.safetensors"});
}

}  // namespace
}  // namespace kiln::nn
