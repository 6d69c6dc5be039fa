// Sharded checkpoints: every member's chunks written, read back onto other world sizes
// byte-equal to the full tensors sliced by hand, consolidated into the file an unsharded
// checkpoint holds, and every kind of bad input refused with its exact error.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "nn/file_io.h"
#include "nn/safetensors.h"
#include "nn/shard_consolidate.h"
#include "nn/shard_index.h"
#include "nn/shard_reader.h"
#include "nn/shard_writer.h"
#include "tensor/crc32c.h"

namespace kiln::nn {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

// Random bytes of `shape` and `dtype`: compared as bytes, never computed with.
TensorData RandomTensor(const Shape& shape, DType dtype, uint32_t seed) {
  TensorData data(shape, dtype);
  std::mt19937 rng(seed);
  auto* bytes = static_cast<unsigned char*>(data.raw());
  for (int64_t i = 0; i < data.nbytes(); ++i) bytes[i] = static_cast<unsigned char>(rng());
  return data;
}

// Member g's chunk of `full` over `world`, by the layout's definition: elements [g*c, (g+1)*c)
// of the flat tensor, c = ceil(n / world), zeros past the end.
TensorData HandSlice(const TensorData& full, int64_t world, int64_t g) {
  const int64_t n = full.numel(), e = DTypeSize(full.dtype()), c = (n + world - 1) / world;
  TensorData out(Shape{c}, full.dtype());
  for (int64_t i = 0; i < c; ++i) {
    if (g * c + i < n) {
      std::memcpy(static_cast<char*>(out.raw()) + i * e, static_cast<const char*>(full.raw()) + (g * c + i) * e, e);
    }
  }
  return out;
}

std::string Bytes(const TensorData& t) {
  return absl::StrCat(t.shape().ToString(), DTypeName(t.dtype()), ":",
                      std::string(static_cast<const char*>(t.raw()), t.nbytes()));
}

std::string FileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void Spill(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Sizes divisible by 2, 3 and 4 (24), by none (7, 15), smaller than N (2, 1), empty; f32 and
// bf16; parameters and optimizer slots.
struct Model {
  ShardPlan plan;
  std::map<std::string, TensorData> full;
};

Model MakeModel(int64_t world) {
  Model m;
  m.plan.world = world;
  m.plan.stage = "optimizer";
  m.plan.metadata = {{"step", "42"}};
  const std::pair<std::string, std::pair<Shape, DType>> tensors[] = {
      {"a.weight", {Shape{4, 6}, DType::kF32}},
      {"a.bias", {Shape{7}, DType::kF32}},
      {"b.weight", {Shape{5, 3}, DType::kBF16}},
      {"b.bias", {Shape{2}, DType::kBF16}},
      {"c.scale", {Shape{1}, DType::kF32}},
      {"d.empty", {Shape{0, 3}, DType::kF32}},
      {"exp_avg/a.weight", {Shape{4, 6}, DType::kF32}},
      {"exp_avg_sq/a.bias", {Shape{7}, DType::kF32}},
      {"momentum/b.bias", {Shape{2}, DType::kBF16}},
  };
  uint32_t seed = 1;
  for (const auto& [name, spec] : tensors) {
    m.plan.tensors.emplace(name, ShardedTensor{spec.first, spec.second});
    m.full.emplace(name, RandomTensor(spec.first, spec.second, seed++));
  }
  return m;
}

std::map<std::string, TensorData> ParametersOf(const Model& m) {
  std::map<std::string, TensorData> out;
  for (const auto& [name, t] : m.full) {
    if (name.find('/') == std::string::npos) out.emplace(name, t);
  }
  return out;
}

class ShardedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::path(::testing::TempDir()) / ::testing::UnitTest::GetInstance()->current_test_info()->name()).string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  // Every member's file (as its own process would write it: one call each), then the index.
  static void Write(const std::string& dir, const Model& m) {
    std::vector<ShardFileInfo> infos;
    for (int64_t g = 0; g < m.plan.world; ++g) {
      MemberChunks chunks;
      for (const auto& [name, full] : m.full) chunks.emplace(name, HandSlice(full, m.plan.world, g));
      auto written = WriteShardFiles(dir, m.plan, {{g, chunks}});
      ASSERT_TRUE(written.ok()) << written.status();
      ASSERT_EQ(written->size(), 1u);
      infos.push_back((*written)[0]);
    }
    ASSERT_TRUE(WriteShardIndex(dir, m.plan, infos).ok());
  }

  void EditIndex(const std::function<void(Json&)>& edit) {
    const std::string path = dir_ + "/index.json";
    Json json = Json::parse(FileBytes(path));
    edit(json);
    Spill(path, json.dump());
  }

  std::string dir_;
};

TEST_F(ShardedCheckpointTest, ReshardsOntoEveryWorldSizeByteEqualToHandSlices) {
  for (int64_t n : {2, 3, 4}) {
    const std::string dir = absl::StrCat(dir_, "/n", n);
    const Model m = MakeModel(n);
    Write(dir, m);
    auto index = ReadShardIndex(dir);
    ASSERT_TRUE(index.ok()) << index.status();
    EXPECT_EQ(index->plan.world, n);
    EXPECT_EQ(index->plan.stage, "optimizer");
    EXPECT_EQ(index->plan.metadata.at("step"), "42");
    for (int64_t world = 1; world <= 5; ++world) {
      for (int64_t g = 0; g < world; ++g) {
        auto got = ReadShard(dir, *index, world, g);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(got->size(), m.full.size());
        for (const auto& [name, full] : m.full) {
          const TensorData& want = world == 1 ? full : HandSlice(full, world, g);
          EXPECT_EQ(Bytes(got->at(name)), Bytes(want)) << name << ": " << n << " -> member " << g << " of " << world;
        }
      }
    }
  }
}

TEST_F(ShardedCheckpointTest, ParametersOnlyLeavesOutTheOptimizerSlots) {
  const Model m = MakeModel(2);
  Write(dir_, m);
  auto index = ReadShardIndex(dir_);
  ASSERT_TRUE(index.ok());
  auto got = ReadShard(dir_, *index, 1, 0, {.parameters_only = true});
  ASSERT_TRUE(got.ok());
  std::vector<std::string> names;
  for (const auto& [name, t] : *got) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"a.bias", "a.weight", "b.bias", "b.weight", "c.scale", "d.empty"}));
}

TEST_F(ShardedCheckpointTest, PaddingReadsAsZerosWhateverWasWritten) {
  Model m = MakeModel(4);
  m.plan.tensors = {{"w", ShardedTensor{Shape{5}, DType::kF32}}};  // c = 2: member 2 holds 1 element, member 3 none
  m.full = {{"w", TensorData::FromVector(std::vector<float>{1, 2, 3, 4, 5}, Shape{5})}};
  std::map<int64_t, MemberChunks> local;
  for (int64_t g = 0; g < 4; ++g) {
    TensorData chunk = HandSlice(m.full.at("w"), 4, g);
    auto v = chunk.mutable_values<float>();
    for (int64_t i = 0; i < 2; ++i) v[i] = g * 2 + i < 5 ? v[i] : 99;  // stale values in the padding
    local.emplace(g, MemberChunks{{"w", chunk}});
  }
  auto infos = WriteShardFiles(dir_, m.plan, local);
  ASSERT_TRUE(infos.ok());
  ASSERT_TRUE(WriteShardIndex(dir_, m.plan, *infos).ok());
  auto index = ReadShardIndex(dir_);
  ASSERT_TRUE(index.ok());
  for (int64_t g = 0; g < 4; ++g) {
    auto got = ReadShard(dir_, *index, 4, g);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->at("w").ToDoubles(), HandSlice(m.full.at("w"), 4, g).ToDoubles()) << g;
  }
  auto three = ReadShard(dir_, *index, 3, 2);  // c = 2: element 4, then padding
  ASSERT_TRUE(three.ok());
  EXPECT_EQ(three->at("w").ToDoubles(), (std::vector<double>{5, 0}));
}

TEST_F(ShardedCheckpointTest, DescribeShardFileAgreesWithTheWriter) {
  const Model m = MakeModel(3);
  std::map<int64_t, MemberChunks> local;
  for (int64_t g = 0; g < 3; ++g) {
    for (const auto& [name, full] : m.full) local[g].emplace(name, HandSlice(full, 3, g));
  }
  auto written = WriteShardFiles(dir_, m.plan, local);
  ASSERT_TRUE(written.ok());
  ASSERT_EQ(written->size(), 3u);
  for (const ShardFileInfo& info : *written) {
    const std::string bytes = FileBytes(dir_ + "/" + info.file);
    EXPECT_EQ(info.bytes, bytes.size());
    EXPECT_EQ(info.crc32c, Crc32c(0, bytes));  // the whole file's, computed independently
    auto described = DescribeShardFile(dir_, info.member, 3);
    ASSERT_TRUE(described.ok()) << described.status();
    EXPECT_EQ(described->file, info.file);
    EXPECT_EQ(described->bytes, info.bytes);
    EXPECT_EQ(described->crc32c, info.crc32c);
    EXPECT_EQ(described->chunk_crc32c, info.chunk_crc32c);
    for (const auto& [name, full] : m.full) {
      const TensorData slice = HandSlice(full, 3, info.member);
      EXPECT_EQ(info.chunk_crc32c.at(name), Crc32c(0, slice.raw(), slice.nbytes())) << name;
    }
  }
}

TEST_F(ShardedCheckpointTest, AFolderIsCompleteOnlyWithItsIndexAndIsNeverOverwritten) {
  const Model m = MakeModel(2);
  MemberChunks chunks;
  for (const auto& [name, full] : m.full) chunks.emplace(name, HandSlice(full, 2, 0));
  ASSERT_TRUE(WriteShardFiles(dir_, m.plan, {{0, chunks}}).ok());
  absl::StatusOr<ShardIndex> index = ReadShardIndex(dir_);
  EXPECT_EQ(index.status(), absl::NotFoundError(dir_ + " has no index.json: it is no sharded checkpoint, or one whose "
                                                       "writing was interrupted"));
  // A leftover of an interrupted write is replaced; once the index is there, nothing is.
  Write(dir_, m);
  const std::string before = FileBytes(dir_ + "/shard-0-of-2.safetensors");
  EXPECT_EQ(WriteShardFiles(dir_, m.plan, {{0, chunks}}).status(),
            absl::AlreadyExistsError(dir_ + " holds a complete sharded checkpoint already (index.json), and nothing is "
                                            "overwritten"));
  auto infos = WriteShardFiles(dir_ + "/other", m.plan, {{0, chunks}});
  ASSERT_TRUE(infos.ok());
  EXPECT_EQ(WriteShardIndex(dir_, m.plan, {}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FileBytes(dir_ + "/shard-0-of-2.safetensors"), before);
}

TEST_F(ShardedCheckpointTest, TheIndexIsNeverReplaced) {
  const Model m = MakeModel(2);
  Write(dir_, m);
  const std::string before = FileBytes(dir_ + "/index.json");
  std::vector<ShardFileInfo> infos;
  for (int64_t g = 0; g < 2; ++g) infos.push_back(*DescribeShardFile(dir_, g, 2));
  ShardPlan plan = m.plan;
  plan.stage = "parameters";
  EXPECT_EQ(WriteShardIndex(dir_, plan, infos),
            absl::AlreadyExistsError(dir_ + "/index.json exists already, and nothing is overwritten"));
  EXPECT_EQ(FileBytes(dir_ + "/index.json"), before);
}

// The index's write: a new file or nothing; a file or a link already there stays as it was.
TEST_F(ShardedCheckpointTest, WriteNewFileAtomicallyReplacesNothing) {
  const absl::string_view hello[] = {"hel", "lo"};
  ASSERT_TRUE(WriteNewFileAtomically(dir_ + "/a", hello).ok());
  EXPECT_EQ(FileBytes(dir_ + "/a"), "hello");
  const absl::string_view bye[] = {"bye"};
  EXPECT_EQ(WriteNewFileAtomically(dir_ + "/a", bye),
            absl::AlreadyExistsError(dir_ + "/a exists already, and nothing is overwritten"));
  EXPECT_EQ(FileBytes(dir_ + "/a"), "hello");
  fs::create_symlink(dir_ + "/target", dir_ + "/link");  // dangling: a write through it would create target
  EXPECT_EQ(WriteNewFileAtomically(dir_ + "/link", bye),
            absl::AlreadyExistsError(dir_ + "/link exists already, and nothing is overwritten"));
  EXPECT_FALSE(fs::exists(dir_ + "/target"));
  EXPECT_TRUE(fs::is_symlink(dir_ + "/link"));
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "link"}));  // no temporary file left behind
}

TEST_F(ShardedCheckpointTest, ALinkIsNotFollowed) {
  fs::create_directories(dir_ + "/real");
  fs::create_directory_symlink(dir_ + "/real", dir_ + "/link");
  const Model m = MakeModel(2);
  MemberChunks chunks;
  for (const auto& [name, full] : m.full) chunks.emplace(name, HandSlice(full, 2, 0));
  EXPECT_EQ(WriteShardFiles(dir_ + "/link", m.plan, {{0, chunks}}).status(),
            absl::FailedPreconditionError(dir_ + "/link is not a folder (links are not followed)"));
  EXPECT_TRUE(fs::is_empty(dir_ + "/real"));
}

TEST_F(ShardedCheckpointTest, ChunksThatDoNotFitThePlanAreRefused) {
  const Model m = MakeModel(2);
  MemberChunks chunks;
  for (const auto& [name, full] : m.full) chunks.emplace(name, HandSlice(full, 2, 0));
  MemberChunks short_chunk = chunks;
  short_chunk["a.bias"] = TensorData(Shape{3}, DType::kF32);
  EXPECT_EQ(WriteShardFiles(dir_, m.plan, {{0, short_chunk}}).status(),
            absl::InvalidArgumentError("member 0 of 2: the chunk of a.bias is f32[3], not f32[4] (tensor [7])"));
  MemberChunks missing = chunks;
  missing.erase("c.scale");
  EXPECT_EQ(WriteShardFiles(dir_, m.plan, {{1, missing}}).status(),
            absl::InvalidArgumentError("member 1 of 2 has no chunk of tensor c.scale"));
  EXPECT_EQ(WriteShardFiles(dir_, m.plan, {{2, chunks}}).status(),
            absl::InvalidArgumentError("member 2 of 2 is no member"));
  ShardPlan orphan = m.plan;
  orphan.tensors.emplace("exp_avg/nothing", ShardedTensor{Shape{1}, DType::kF32});
  EXPECT_EQ(WriteShardFiles(dir_, orphan, {{0, chunks}}).status(),
            absl::InvalidArgumentError("the sharded checkpoint plan: tensor \"exp_avg/nothing\" is neither a parameter "
                                       "(a path without '/') nor an optimizer slot \"<slot>/<path>\" of one"));
  ShardPlan stage = m.plan;
  stage.stage = "zero3";
  EXPECT_EQ(WriteShardFiles(dir_, stage, {{0, chunks}}).status(),
            absl::InvalidArgumentError("the sharded checkpoint plan: stage \"zero3\" is none of none, optimizer, "
                                       "gradients, parameters"));
  EXPECT_FALSE(fs::exists(dir_ + "/shard-0-of-2.safetensors"));
}

TEST_F(ShardedCheckpointTest, AMissingShardFileIsNamed) {
  Write(dir_, MakeModel(2));
  auto index = ReadShardIndex(dir_);
  ASSERT_TRUE(index.ok());
  fs::remove(dir_ + "/shard-1-of-2.safetensors");
  // Every member meets it, also one that would not read the file.
  for (int64_t g : {0, 1}) {
    EXPECT_EQ(ReadShard(dir_, *index, 2, g).status(),
              absl::NotFoundError(dir_ + "/shard-1-of-2.safetensors is missing: the sharded checkpoint " + dir_ +
                                  " is incomplete (its index lists the file)"));
  }
}

TEST_F(ShardedCheckpointTest, ATamperedChunkIsFoundByItsChecksum) {
  const Model m = MakeModel(2);
  Write(dir_, m);
  auto index = ReadShardIndex(dir_);
  ASSERT_TRUE(index.ok());
  // The file's last byte is the last byte of its last tensor in name order: momentum/b.bias.
  const std::string path = dir_ + "/shard-1-of-2.safetensors";
  std::string bytes = FileBytes(path);
  bytes.back() ^= 0x40;
  Spill(path, bytes);
  TensorData tampered = HandSlice(m.full.at("momentum/b.bias"), 2, 1);
  const uint32_t recorded = Crc32c(0, tampered.raw(), tampered.nbytes());
  static_cast<char*>(tampered.raw())[tampered.nbytes() - 1] ^= 0x40;
  const uint32_t computed = Crc32c(0, tampered.raw(), tampered.nbytes());
  EXPECT_EQ(ReadShard(dir_, *index, 1, 0).status(),
            absl::DataLossError(absl::StrFormat("%s: the chunk of tensor momentum/b.bias was changed or damaged after "
                                                "it was written (crc32c recorded %08x, computed %08x)",
                                                path, recorded, computed)));
  // A member that reads only the other file is unaffected.
  auto other = ReadShard(dir_, *index, 2, 0);
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(Bytes(other->at("momentum/b.bias")), Bytes(HandSlice(m.full.at("momentum/b.bias"), 2, 0)));
}

TEST_F(ShardedCheckpointTest, AFileThatDisagreesWithTheIndexIsNamed) {
  const Model m = MakeModel(2);
  Write(dir_, m);
  const std::string path = dir_ + "/shard-0-of-2.safetensors";
  const std::string good = FileBytes(path);
  // Longer than recorded.
  Spill(path, good + "x");
  auto index = ReadShardIndex(dir_);
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(ReadShard(dir_, *index, 2, 0).status(),
            absl::DataLossError(absl::StrCat(path, " has ", good.size() + 1, " bytes, but the index records ",
                                             good.size(), ": it was changed after the index was written")));
  // A short chunk, a chunk of another dtype, a tensor missing or extra: the file rewritten
  // that way and the index's size made to match, so that only the header disagrees.
  auto with = [&](const std::function<void(MemberChunks&)>& change) {
    MemberChunks chunks;
    for (const auto& [name, full] : m.full) chunks.emplace(name, HandSlice(full, 2, 0));
    change(chunks);
    EXPECT_TRUE(WriteSafetensors(path, TensorFile{chunks, {}}).ok());
    const uint64_t size = fs::file_size(path);
    EditIndex([&](Json& json) { json["files"][0]["bytes"] = size; });
    auto edited = ReadShardIndex(dir_);
    EXPECT_TRUE(edited.ok());
    return ReadShard(dir_, *edited, 1, 0).status();
  };
  EXPECT_EQ(with([](MemberChunks& c) { c["a.bias"] = TensorData(Shape{3}, DType::kF32); }),
            absl::DataLossError(path + ": tensor a.bias is F32[3], but the index records a chunk of F32[4] (the file "
                                       "does not match its index)"));
  EXPECT_EQ(with([](MemberChunks& c) { c["a.bias"] = TensorData(Shape{4}, DType::kBF16); }),
            absl::DataLossError(path + ": tensor a.bias is BF16[4], but the index records a chunk of F32[4] (the file "
                                       "does not match its index)"));
  EXPECT_EQ(with([](MemberChunks& c) { c.erase("b.weight"); }),
            absl::DataLossError(path + " has no tensor b.weight, which the index records in it"));
  EXPECT_EQ(with([](MemberChunks& c) { c["z"] = TensorData(Shape{1}, DType::kF32); }),
            absl::DataLossError(path + " has tensor z, which the index does not record"));
}

TEST_F(ShardedCheckpointTest, AnIndexWhoseShardsDoNotCoverTheModelIsRefused) {
  Write(dir_, MakeModel(2));
  const std::string path = dir_ + "/index.json";
  const std::string good = FileBytes(path);
  auto refused = [&](const std::function<void(Json&)>& edit) {
    Spill(path, good);
    EditIndex(edit);
    return ReadShardIndex(dir_).status();
  };
  EXPECT_EQ(refused([](Json& j) { j["files"].erase(1); }),
            absl::InvalidArgumentError(path + ": the index lists 1 shard files for 2 members (member 1 has none): the "
                                              "shards do not cover the checkpoint"));
  EXPECT_EQ(refused([](Json& j) { j["files"][1] = j["files"][0]; }),
            absl::InvalidArgumentError(path + ": member 0 has two shard files: the shards overlap"));
  EXPECT_EQ(refused([](Json& j) { j["files"][1]["member"] = 2; }),
            absl::InvalidArgumentError(path + ": a shard file is listed for member 2 of a world of 2"));
  EXPECT_EQ(refused([](Json& j) { j["files"][0]["chunks"].erase("c.scale"); }),
            absl::InvalidArgumentError(path + ": shard-0-of-2.safetensors has no chunk of tensor c.scale: the shards "
                                              "do not cover it"));
  EXPECT_EQ(refused([](Json& j) { j["files"][1]["file"] = "../../etc/passwd"; }),
            absl::InvalidArgumentError(path + ": member 1's shard file is \"../../etc/passwd\", not "
                                              "shard-1-of-2.safetensors"));
  EXPECT_EQ(refused([](Json& j) { j["world_size"] = 3; }),
            absl::InvalidArgumentError(path + ": member 0's shard file is \"shard-0-of-2.safetensors\", not "
                                              "shard-0-of-3.safetensors"));
}

TEST_F(ShardedCheckpointTest, AMalformedIndexIsRefused) {
  const std::string path = "ck/index.json";
  auto parsed = [&](const std::string& text) { return ParseShardIndex(text, path).status(); };
  const std::string prefix = path + " is not a valid sharded checkpoint index: ";
  EXPECT_EQ(parsed("{"), absl::DataLossError(prefix + "it is not JSON"));
  EXPECT_EQ(parsed("[]"), absl::DataLossError(prefix + "it is not a JSON object"));
  EXPECT_EQ(parsed(R"({"format":"kiln-sharded-checkpoint/2"})"),
            absl::DataLossError(prefix + "its format is not kiln-sharded-checkpoint/1"));
  const std::string head = R"({"format":"kiln-sharded-checkpoint/1","stage":"none","metadata":{},)";
  EXPECT_EQ(parsed(head + R"("world_size":0,"tensors":{},"files":[]})"),
            absl::InvalidArgumentError(path + ": world size 0 is not in [1, 1048576]"));
  EXPECT_EQ(parsed(head + R"("world_size":-1,"tensors":{},"files":[]})"),
            absl::DataLossError(prefix + "it lacks world_size (at most 1048576), stage, metadata, tensors or files"));
  EXPECT_EQ(parsed(head + R"("world_size":1,"tensors":{"w":{"dtype":"U8","shape":[1]}},"files":[]})"),
            absl::DataLossError(prefix + "tensor w has no dtype kiln reads"));
  EXPECT_EQ(
      parsed(head + R"("world_size":1,"tensors":{"w":{"dtype":"F32","shape":[4294967296,4294967296]}},)"
                    R"("files":[]})"),
      absl::DataLossError(prefix + "tensor w has a bad shape (dims must be whole numbers, 2^62 elements at most)"));
  EXPECT_EQ(
      parsed(head + R"("world_size":1,"tensors":{},"files":[{"member":0,"file":"shard-0-of-1.safetensors",)"
                    R"("bytes":8,"crc32c":"0000000G","chunks":{}}]})"),
      absl::DataLossError(prefix + "a file entry lacks its member, file, bytes, crc32c (8 hex digits) or chunks"));
  auto ok = ParseShardIndex(head + R"("world_size":1,"tensors":{},"files":[{"member":0,)"
                                   R"("file":"shard-0-of-1.safetensors","bytes":8,"crc32c":"0000abcd","chunks":{}}]})",
                            path);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->files[0].crc32c, 0xabcdu);
}

TEST_F(ShardedCheckpointTest, ConsolidatesToTheBytesOfTheUnshardedModelFile) {
  for (int64_t n : {2, 3}) {
    const std::string dir = absl::StrCat(dir_, "/n", n);
    const Model m = MakeModel(n);
    Write(dir, m);
    const std::string out = dir + "/model.safetensors";
    std::vector<std::string> seen;
    auto model = ConsolidateShardedCheckpoint(dir, out, [&](const std::string& name, int64_t done, int64_t total) {
      seen.push_back(absl::StrCat(name, " ", done, "/", total));
    });
    ASSERT_TRUE(model.ok()) << model.status();
    EXPECT_EQ(seen, (std::vector<std::string>{"a.bias 1/6", "a.weight 2/6", "b.bias 3/6", "b.weight 4/6", "c.scale 5/6",
                                              "d.empty 6/6"}));
    // What an unsharded checkpoint writes for the same parameters (SnapshotTraining's model).
    const std::string direct = dir + "/direct.safetensors";
    ASSERT_TRUE(WriteSafetensors(direct, TensorFile{ParametersOf(m), {{"format", "pt"}}}).ok());
    EXPECT_EQ(FileBytes(out), FileBytes(direct));
    EXPECT_EQ(model->tensors, 6);
    EXPECT_EQ(model->elements, 24 + 7 + 15 + 2 + 1 + 0);
    EXPECT_EQ(model->bytes, FileBytes(direct).size());
    EXPECT_EQ(ConsolidateShardedCheckpoint(dir, out).status(),
              absl::AlreadyExistsError(out + " exists already, and nothing is overwritten"));
  }
}

}  // namespace
}  // namespace kiln::nn
