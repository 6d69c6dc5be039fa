// tools/text_to_tokens: turns any text corpus (a file, or a folder's plain files joined in name
// order, as examples/gpt --train_data reads text) into token files of its bytes (vocabulary
// 256): nanoGPT's train.bin and val.bin, or llm.c's shards in train/ and val/ folders. The
// corpus is memory-mapped and written out streaming, so its size is bounded by the disk, not
// memory. Progress on stderr, one JSON line on stdout at the end. Exit 0 when written, 2 on bad
// input (naming it: a flag, a missing or empty corpus, an output that exists), 1 when a write
// fails.
//
//   text_to_tokens --input=PATH --output_dir=DIR [--format=bin|shard] [--val_fraction=0.1]
//                  [--shard_tokens=100000000]
#include <sys/stat.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "data/token_dataset.h"
#include "data/token_writer.h"
#include "nlohmann/json.hpp"

namespace {

constexpr char kUsage[] =
    "usage: text_to_tokens --input=PATH --output_dir=DIR [--format=bin|shard] [--val_fraction=0.1] "
    "[--shard_tokens=100000000]";

struct Options {
  std::string input, output_dir;
  kiln::data::TokenFormat format = kiln::data::TokenFormat::kRaw;
  double val_fraction = 0.1;
  int64_t shard_tokens = 100000000;
};

struct BadInput {
  std::string message;
};

// One output file: where, and which of the corpus's tokens.
struct Piece {
  std::string path;
  int64_t begin, count;
};

Options ParseFlags(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    std::string value;
    if (absl::ConsumePrefix(&arg, "--input=")) {
      o.input = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--output_dir=")) {
      o.output_dir = std::string(arg);
    } else if (absl::ConsumePrefix(&arg, "--format=")) {
      if (arg != "bin" && arg != "shard") throw BadInput{absl::StrCat("--format=", arg, ": expected bin or shard")};
      o.format = arg == "bin" ? kiln::data::TokenFormat::kRaw : kiln::data::TokenFormat::kShard;
    } else if (absl::ConsumePrefix(&arg, "--val_fraction=")) {
      if (!absl::SimpleAtod(arg, &o.val_fraction) || !(o.val_fraction > 0 && o.val_fraction < 1)) {
        throw BadInput{absl::StrCat("--val_fraction=", arg, ": expected a number between 0 and 1")};
      }
    } else if (absl::ConsumePrefix(&arg, "--shard_tokens=")) {
      if (!absl::SimpleAtoi(arg, &o.shard_tokens) || o.shard_tokens < 1 || o.shard_tokens > INT32_MAX) {
        throw BadInput{absl::StrCat("--shard_tokens=", arg, ": expected 1..", INT32_MAX)};
      }
    } else {
      throw BadInput{absl::StrCat("unknown argument ", arg, "\n", kUsage)};
    }
  }
  if (o.input.empty() || o.output_dir.empty())
    throw BadInput{absl::StrCat("--input and --output_dir are needed\n", kUsage)};
  return o;
}

// The files of one split: DIR/<split>.bin, or DIR/<split>/shard_NNNNNN.bin of --shard_tokens.
std::vector<Piece> SplitFiles(const Options& o, const std::string& split, int64_t begin, int64_t count) {
  if (o.format == kiln::data::TokenFormat::kRaw)
    return {{absl::StrCat(o.output_dir, "/", split, ".bin"), begin, count}};
  std::vector<Piece> pieces;
  for (int64_t at = 0; at < count; at += o.shard_tokens) {
    pieces.push_back({absl::StrFormat("%s/%s/shard_%06d.bin", o.output_dir, split, pieces.size()), begin + at,
                      std::min(o.shard_tokens, count - at)});
  }
  return pieces;
}

void MakeFolder(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    throw BadInput{absl::StrCat("cannot create the folder ", dir, ": ", std::strerror(errno))};
  }
}

int Run(const Options& o) {
  auto corpus = kiln::data::TokenDataset::Open(o.input, {.format = kiln::data::TokenFormat::kBytes});
  if (!corpus.ok()) throw BadInput{absl::StrCat("--input=", o.input, ": ", corpus.status().message())};
  const int64_t total = corpus->size();
  const int64_t train = static_cast<int64_t>(std::floor(static_cast<double>(total) * (1 - o.val_fraction)));
  if (train < 1 || train >= total) {
    throw BadInput{absl::StrCat("--input=", o.input, ": ", total, " bytes cannot be split with --val_fraction=",
                                o.val_fraction, " (each split needs at least one)")};
  }
  std::vector<Piece> pieces = SplitFiles(o, "train", 0, train);
  for (Piece& p : SplitFiles(o, "val", train, total - train)) pieces.push_back(std::move(p));
  MakeFolder(o.output_dir);
  if (o.format == kiln::data::TokenFormat::kShard) {
    MakeFolder(o.output_dir + "/train");
    MakeFolder(o.output_dir + "/val");
  }
  for (const Piece& p : pieces) {  // before anything is written
    struct stat st {};
    if (lstat(p.path.c_str(), &st) == 0) throw BadInput{absl::StrCat(p.path, " exists already")};
  }
  int64_t written = 0, reported = 0;
  for (const Piece& p : pieces) {
    const absl::Status s = kiln::data::WriteTokenFile(p.path, o.format, *corpus, p.begin, p.count, [&](int64_t done) {
      if (written + done - reported >= (int64_t{64} << 20)) {
        reported = written + done;
        std::fprintf(stderr, "text_to_tokens: %lld of %lld tokens written\n", static_cast<long long>(reported),
                     static_cast<long long>(total));
      }
    });
    if (!s.ok()) {
      std::fprintf(stderr, "text_to_tokens: %s\n", std::string(s.message()).c_str());
      return s.code() == absl::StatusCode::kAlreadyExists ? 2 : 1;
    }
    written += p.count;
  }
  const bool bin = o.format == kiln::data::TokenFormat::kRaw;
  const nlohmann::json line = {{"input", o.input},
                               {"format", bin ? "bin" : "shard"},
                               {"vocab", 256},
                               {"train_tokens", train},
                               {"val_tokens", total - train},
                               {"files", pieces.size()},
                               {"train_data", absl::StrCat(o.output_dir, bin ? "/train.bin" : "/train")},
                               {"val_data", absl::StrCat(o.output_dir, bin ? "/val.bin" : "/val")}};
  std::printf("%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--help") {
      std::printf(
          "%s\nWrites the bytes of a text corpus as token files (vocabulary 256) for examples/gpt "
          "--train_data/--val_data.\n",
          kUsage);
      return 0;
    }
  }
  try {
    return Run(ParseFlags(argc, argv));
  } catch (const BadInput& e) {
    std::fprintf(stderr, "text_to_tokens: %s\n", e.message.c_str());
    return 2;
  }
}
