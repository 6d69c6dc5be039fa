// Where the tokens of one file lie, from its first bytes and its size: nanoGPT's raw .bin (uint16
// ids, little-endian, nothing else), llm.c's token shard (a header of 256 little-endian int32:
// magic 20240520, version 1, the token count; then that many uint16 ids) or any other file as
// bytes (each byte a token, a vocabulary of 256). A pure function of bytes, so it can be fuzzed.
#ifndef KILN_DATA_TOKEN_FILE_H_
#define KILN_DATA_TOKEN_FILE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace kiln::data {

enum class TokenFormat {
  kAuto,   // by name: a ".bin" is an llm.c shard if it starts with the shard magic, else raw
  kRaw,    // nanoGPT's raw uint16 .bin
  kShard,  // llm.c's shard
  kBytes,  // text: one token per byte
};

inline constexpr int32_t kShardMagic = 20240520;
inline constexpr int32_t kShardVersion = 1;
inline constexpr int64_t kShardHeaderBytes = 256 * 4;

// "auto", "bin", "shard" or "text"; InvalidArgument naming the choices otherwise.
absl::StatusOr<TokenFormat> ParseTokenFormat(const std::string& name);
const char* TokenFormatName(TokenFormat format);

struct TokenLayout {
  TokenFormat format = TokenFormat::kBytes;  // kRaw, kShard or kBytes: never kAuto
  int64_t offset = 0;                        // of the first token, in bytes
  int64_t count = 0;                         // tokens (at least one)
  int width = 1;                             // bytes per token: 1 (text) or 2
};

// The layout of the file `path` of `size` bytes whose first bytes are `head` (all of them, or
// at least the first 1024). Errors are InvalidArgument naming the path (see token_file.cc).
absl::StatusOr<TokenLayout> ParseTokenLayout(const std::string& path, absl::Span<const uint8_t> head, int64_t size,
                                             TokenFormat format);

}  // namespace kiln::data

#endif  // KILN_DATA_TOKEN_FILE_H_
