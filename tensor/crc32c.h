// CRC-32C (Castagnoli), the checksum of iSCSI, ext4 and many storage formats: training
// checkpoints carry one so that a flipped bit in a file is found on resume, not trained on.
// The SSE4.2 crc32 instruction where the CPU has it (~3.5 GB/s on a Zen 4 core), a table
// otherwise; both give the same value.
#ifndef KILN_TENSOR_CRC32C_H_
#define KILN_TENSOR_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"

namespace kiln {

// The CRC-32C of `bytes` continuing from `crc` (0 to start): Crc32c(Crc32c(0, a), b) is the
// CRC-32C of a followed by b.
uint32_t Crc32c(uint32_t crc, const void* bytes, size_t size);
inline uint32_t Crc32c(uint32_t crc, absl::string_view bytes) { return Crc32c(crc, bytes.data(), bytes.size()); }

// The table path alone, for tests that compare the two.
uint32_t Crc32cPortable(uint32_t crc, const void* bytes, size_t size);

}  // namespace kiln

#endif  // KILN_TENSOR_CRC32C_H_
