// Writing outputs far larger than the caches with non-temporal (streaming) stores, as glibc's
// memcpy does: a normal store first reads the cache line it is about to overwrite, a third more
// memory traffic for an element-wise op (two reads and a write), and evicts the inputs on its
// way; a streaming store does neither. Outputs that fit the caches are likely read again soon,
// so they keep normal stores.
#ifndef KILN_BACKENDS_CPU_STREAMING_STORE_H_
#define KILN_BACKENDS_CPU_STREAMING_STORE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace kiln::cpu {

// Outputs from this size on are streamed: beyond the last-level cache share of a core on the
// machines kiln runs on (and where glibc's memcpy switches to streaming stores).
inline constexpr int64_t kStreamingBytes = int64_t{16} << 20;

// Writes out[0, n) through `produce(dst, offset, count)`, which computes elements
// [offset, offset + count) into dst: block by block into a buffer that stays in L1, each block
// then streamed to `out`. The values are produce's, bit for bit.
template <class R, class Produce>
void WriteStreaming(R* out, int64_t n, Produce produce) {
#if defined(__AVX__)
  constexpr int64_t kBlock = 1024;  // elements; a multiple of 32 bytes for every element size
  constexpr int64_t kAlign = 32;
  int64_t head = (kAlign - reinterpret_cast<uintptr_t>(out) % kAlign) % kAlign / static_cast<int64_t>(sizeof(R));
  if (reinterpret_cast<uintptr_t>(out) % sizeof(R) != 0) head = n;  // cannot align: plain stores
  head = std::min(head, n);
  if (head > 0) produce(out, 0, head);
  alignas(64) R block[kBlock];
  int64_t at = head;
  for (; at + kBlock <= n; at += kBlock) {
    produce(block, at, kBlock);
    auto* dst = reinterpret_cast<__m256i*>(out + at);
    const auto* src = reinterpret_cast<const __m256i*>(block);
    for (size_t w = 0; w < kBlock * sizeof(R) / sizeof(__m256i); ++w)
      _mm256_stream_si256(dst + w, _mm256_load_si256(src + w));
  }
  if (at < n) produce(out + at, at, n - at);
  _mm_sfence();  // streamed stores are weakly ordered: make them visible before the op returns
#else
  produce(out, 0, n);
#endif
}

// How far ahead of its use PrefetchRun fetches an input: a few blocks of WriteStreaming.
inline constexpr int64_t kPrefetchBytes = 16 << 10;

// Asks for the cache lines of `count` elements at `p` (`stride` 1; 0 is one value, already
// cached), kPrefetchBytes ahead of where the caller reads now. With two input streams and a
// streamed output one core's hardware prefetchers fall behind (add of 16M floats on one thread:
// 0.8 of memcpy's bandwidth without, 0.9-1.0 with).
template <class T>
void PrefetchAhead(const T* p, int64_t stride, int64_t count, const T* end) {
  if (stride != 1) return;
  constexpr int64_t kAhead = kPrefetchBytes / static_cast<int64_t>(sizeof(T));
  constexpr int64_t kLine = 64 / static_cast<int64_t>(sizeof(T));
  for (const T* q = p + kAhead; q < p + kAhead + count && q < end; q += kLine) __builtin_prefetch(q);
}

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_STREAMING_STORE_H_
