// The token dataset on files written here byte by byte (nanoGPT .bin, llm.c shards, text,
// folders of them), good and damaged: the ids read back, the vocabulary, and every error's
// exact message.
#include "data/token_dataset.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/data/hostile_files.h"

namespace kiln::data {
namespace {

std::string Uint16s(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) {
    s += static_cast<char>(id & 0xff);
    s += static_cast<char>(id >> 8);
  }
  return s;
}

std::string Int32s(const std::vector<int32_t>& values) {
  std::string s;
  for (int32_t v : values) {
    for (int b = 0; b < 4; ++b) s += static_cast<char>(static_cast<uint32_t>(v) >> (8 * b));
  }
  return s;
}

// llm.c's layout, written from its description: 256 int32 (magic, version, count, zeros).
std::string Shard(const std::vector<int>& ids, int32_t magic = 20240520, int32_t version = 1, int32_t count = -1) {
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = version;
  header[2] = count >= 0 ? count : static_cast<int32_t>(ids.size());
  return Int32s(header) + Uint16s(ids);
}

class TokenDatasetTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& bytes) {
    const std::string path = absl::StrCat(dir_, "/", name);
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  std::vector<int64_t> All(const TokenDataset& d) {
    std::vector<int64_t> out(d.size());
    EXPECT_TRUE(d.Read(0, absl::MakeSpan(out)).ok());
    return out;
  }
  absl::Status Error(const std::string& path, TokenDatasetOptions options = {}) {
    return TokenDataset::Open(path, options).status();
  }
  const std::string dir_ = ::testing::TempDir() + "/token_dataset_test";
};

TEST_F(TokenDatasetTest, ReadsNanoGptBinShardsAndText) {
  const auto raw = TokenDataset::Open(Write("raw.bin", Uint16s({5, 50256, 0, 700})));
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ(raw->size(), 4);
  EXPECT_EQ(raw->vocab(), 50257);  // the largest id + 1
  EXPECT_STREQ(raw->format(), "bin");
  EXPECT_EQ(All(*raw), (std::vector<int64_t>{5, 50256, 0, 700}));

  const auto shard = TokenDataset::Open(Write("shard.bin", Shard({9, 65535, 1})));
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_STREQ(shard->format(), "shard");
  EXPECT_EQ(shard->vocab(), 65536);
  EXPECT_EQ(All(*shard), (std::vector<int64_t>{9, 65535, 1}));

  const auto text = TokenDataset::Open(Write("a.txt", "Hi\xff"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_STREQ(text->format(), "text");
  EXPECT_EQ(text->vocab(), 256);
  EXPECT_EQ(All(*text), (std::vector<int64_t>{'H', 'i', 255}));
}

TEST_F(TokenDatasetTest, FoldersAreOneStreamInNameOrder) {
  Write("shards/b.bin", Shard({3, 4}));
  Write("shards/a.bin", Shard({1, 2}));
  Write("shards/README", "not tokens");
  const auto shards = TokenDataset::Open(dir_ + "/shards");
  ASSERT_TRUE(shards.ok()) << shards.status();
  EXPECT_EQ(All(*shards), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(shards->files(), (std::vector<std::string>{dir_ + "/shards/a.bin", dir_ + "/shards/b.bin"}));
  std::vector<int64_t> across(2);  // a read that spans two files
  ASSERT_TRUE(shards->Read(1, absl::MakeSpan(across)).ok());
  EXPECT_EQ(across, (std::vector<int64_t>{2, 3}));

  Write("text/2", "cd");
  Write("text/1", "ab");
  Write("text/1.dat", "index");  // fortune's indexes are left out, as are hidden and empty files
  Write("text/.hidden", "x");
  Write("text/empty", "");
  const auto text = TokenDataset::Open(dir_ + "/text");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(All(*text), (std::vector<int64_t>{'a', 'b', 'c', 'd'}));
  EXPECT_EQ(text->files(), (std::vector<std::string>{dir_ + "/text/1", dir_ + "/text/2"}));
}

TEST_F(TokenDatasetTest, SlicesShareTheFiles) {
  const auto d = TokenDataset::Open(Write("slice.bin", Uint16s({10, 11, 12, 13, 14})));
  ASSERT_TRUE(d.ok());
  const TokenDataset tail = d->Slice(3, 5);
  EXPECT_EQ(tail.size(), 2);
  EXPECT_EQ(All(tail), (std::vector<int64_t>{13, 14}));
  std::vector<int64_t> out(2);
  EXPECT_EQ(tail.Read(1, absl::MakeSpan(out)).message(), "tokens [1, 3) lie beyond the dataset's 2");
}

TEST_F(TokenDatasetTest, VocabularyFromAFlagIsChecked) {
  const std::string path = Write("ids.bin", Uint16s({1, 2, 300, 400}));
  const auto ok = TokenDataset::Open(path, {.vocab = 401});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->vocab(), 401);
  EXPECT_EQ(Error(path, {.vocab = 300}).message(),
            path + ": token id 300 at byte offset 4 (token 2 of the file) is not below the vocabulary size 300");
  const std::string shard = Write("ids_shard.bin", Shard({1, 2, 300}));
  EXPECT_EQ(Error(shard, {.vocab = 256}).message(),
            shard + ": token id 300 at byte offset 1028 (token 2 of the file) is not below the vocabulary size 256");
  const std::string text = Write("ids.txt", "ab\x80");
  EXPECT_EQ(Error(text, {.vocab = 128}).message(),
            text + ": token id 128 at byte offset 2 (token 2 of the file) is not below the vocabulary size 128");
}

TEST_F(TokenDatasetTest, DamagedFilesNameTheProblem) {
  const std::string odd = Write("odd.bin", "abc");
  EXPECT_EQ(Error(odd).message(), odd + ": an odd length (3 bytes) for a file of uint16 tokens");
  const std::string shortened = Write("short.bin", Shard({1, 2}).substr(0, 100));
  EXPECT_EQ(Error(shortened, {.format = TokenFormat::kShard}).message(),
            shortened + ": 100 bytes are too few for llm.c's 1024-byte shard header (truncated)");
  const std::string magic = Write("magic.bin", Shard({1, 2}, 12345));
  EXPECT_EQ(Error(magic, {.format = TokenFormat::kShard}).message(),
            magic + ": magic 12345 is not llm.c's token shard magic 20240520");
  const std::string version = Write("version.bin", Shard({1, 2}, 20240520, 2));
  EXPECT_EQ(Error(version).message(), version + ": llm.c shard version 2 is not supported (only 1)");
  const std::string count = Write("count.bin", Shard({1, 2, 3}, 20240520, 1, 4));
  EXPECT_EQ(Error(count).message(),
            count + ": the shard header claims 4 tokens (8 bytes), but 6 bytes follow the header");
  const std::string none = Write("none.bin", Shard({}, 20240520, 1, 0));
  EXPECT_EQ(Error(none).message(), none + ": the shard header claims 0 tokens");
  const std::string llama = Write("llama.bin", Shard({1}, 20240801, 7));
  EXPECT_EQ(
      Error(llama).message(),
      llama + ": magic 20240801 marks an llm.c llama-3 shard (uint32 tokens), not a token shard of magic 20240520");
  const std::string empty = Write("empty.txt", "");
  EXPECT_EQ(Error(empty).message(), empty + ": the file is empty: no tokens");
  Write("e/x", "");
  EXPECT_EQ(Error(dir_ + "/e").message(), dir_ + "/e holds no tokens");
}

TEST_F(TokenDatasetTest, UnreadableInputIsNamed) {
  const absl::Status missing = Error(dir_ + "/missing.bin");
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), "cannot open " + dir_ + "/missing.bin: No such file or directory");
  std::filesystem::create_directories(dir_ + "/nothing");
  EXPECT_EQ(Error(dir_ + "/nothing").message(), dir_ + "/nothing holds no plain file to read");
  EXPECT_EQ(Error(dir_ + "/nothing", {.format = TokenFormat::kRaw}).message(),
            dir_ + "/nothing holds no token file (*.bin) to read");
  EXPECT_EQ(Error(dir_ + "/x", {.vocab = -1}).message(), "a vocabulary of -1 tokens is out of range");
  // A FIFO is refused at once, not waited on.
  const std::string fifo = dir_ + "/fifo.bin";
  EXPECT_TRUE(kiln::testing::ReturnsWithoutAWriter(fifo, [](const std::string& path) {
    EXPECT_EQ(TokenDataset::Open(path).status().message(), path + " is not a regular file");
  }));
}

}  // namespace
}  // namespace kiln::data
