#include "data/token_file.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln::data {
namespace {

// llm.c's other files: read as raw tokens they would give garbage, so they are named instead.
constexpr int32_t kLlama3ShardMagic = 20240801;
constexpr int32_t kEvalFileMagic = 20240522;

int32_t LittleEndianInt32(absl::Span<const uint8_t> bytes, int index) {
  const uint8_t* p = bytes.data() + 4 * index;
  return static_cast<int32_t>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
}

absl::Status Bad(const std::string& path, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
}

absl::StatusOr<TokenLayout> ShardLayout(const std::string& path, absl::Span<const uint8_t> head, int64_t size) {
  if (size < kShardHeaderBytes || static_cast<int64_t>(head.size()) < kShardHeaderBytes) {
    return Bad(path, absl::StrCat(size, " bytes are too few for llm.c's ", kShardHeaderBytes,
                                  "-byte shard header (truncated)"));
  }
  const int32_t magic = LittleEndianInt32(head, 0), version = LittleEndianInt32(head, 1);
  const int32_t count = LittleEndianInt32(head, 2);
  if (magic != kShardMagic) {
    return Bad(path, absl::StrCat("magic ", magic, " is not llm.c's token shard magic ", kShardMagic));
  }
  if (version != kShardVersion) {
    return Bad(path, absl::StrCat("llm.c shard version ", version, " is not supported (only ", kShardVersion, ")"));
  }
  if (count <= 0) return Bad(path, absl::StrCat("the shard header claims ", count, " tokens"));
  const int64_t body = size - kShardHeaderBytes;
  if (body != int64_t{2} * count) {
    return Bad(path, absl::StrCat("the shard header claims ", count, " tokens (", int64_t{2} * count, " bytes), but ",
                                  body, " bytes follow the header"));
  }
  return TokenLayout{.format = TokenFormat::kShard, .offset = kShardHeaderBytes, .count = count, .width = 2};
}

}  // namespace

absl::StatusOr<TokenFormat> ParseTokenFormat(const std::string& name) {
  if (name == "auto") return TokenFormat::kAuto;
  if (name == "bin") return TokenFormat::kRaw;
  if (name == "shard") return TokenFormat::kShard;
  if (name == "text") return TokenFormat::kBytes;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown token file format \"", name.substr(0, 40), "\" (expected auto, bin, shard or text)"));
}

const char* TokenFormatName(TokenFormat format) {
  switch (format) {
    case TokenFormat::kAuto: return "auto";
    case TokenFormat::kRaw: return "bin";
    case TokenFormat::kShard: return "shard";
    case TokenFormat::kBytes: return "text";
  }
  return "?";
}

absl::StatusOr<TokenLayout> ParseTokenLayout(const std::string& path, absl::Span<const uint8_t> head, int64_t size,
                                             TokenFormat format) {
  if (size <= 0) return Bad(path, "the file is empty: no tokens");
  if (format == TokenFormat::kAuto) {
    format = TokenFormat::kBytes;
    if (absl::EndsWith(path, ".bin")) {
      const int32_t magic = head.size() >= 4 ? LittleEndianInt32(head, 0) : 0;
      if (magic == kLlama3ShardMagic || magic == kEvalFileMagic) {
        return Bad(path, absl::StrCat("magic ", magic, " marks an llm.c ",
                                      magic == kEvalFileMagic ? "evaluation file" : "llama-3 shard (uint32 tokens)",
                                      ", not a token shard of magic ", kShardMagic));
      }
      format = magic == kShardMagic ? TokenFormat::kShard : TokenFormat::kRaw;
    }
  }
  switch (format) {
    case TokenFormat::kShard: return ShardLayout(path, head, size);
    case TokenFormat::kRaw:
      if (size % 2 != 0) {
        return Bad(path, absl::StrCat("an odd length (", size, " bytes) for a file of uint16 tokens"));
      }
      return TokenLayout{.format = TokenFormat::kRaw, .offset = 0, .count = size / 2, .width = 2};
    default: return TokenLayout{.format = TokenFormat::kBytes, .offset = 0, .count = size, .width = 1};
  }
}

}  // namespace kiln::data
