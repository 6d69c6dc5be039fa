// Writes token files as data/token_file.h reads them (nanoGPT's raw .bin, llm.c's shard),
// streaming from a TokenDataset so that nothing is held whole, and atomically: into a fresh
// temporary file beside the target, flushed, then renamed onto a name where nothing is yet.
#ifndef KILN_DATA_TOKEN_WRITER_H_
#define KILN_DATA_TOKEN_WRITER_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "data/token_dataset.h"
#include "data/token_file.h"

namespace kiln::data {

// Tokens [begin, begin + count) of `source` to `path` as `format` (kRaw or kShard); `progress`
// (if set) hears the tokens written so far now and then. AlreadyExists "<path> exists already"
// without writing; InvalidArgument for an id above 65535, a range outside the source, more
// tokens than a shard's int32 count holds, or another format; the errno's error for a failed
// write (the temporary file removed, nothing at `path`).
absl::Status WriteTokenFile(const std::string& path, TokenFormat format, const TokenDataset& source, int64_t begin,
                            int64_t count, const std::function<void(int64_t)>& progress = nullptr);

}  // namespace kiln::data

#endif  // KILN_DATA_TOKEN_WRITER_H_
