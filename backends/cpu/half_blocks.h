// Half operands of the CPU's f32 kernels, widened a block at a time: each block of a run is
// converted to f32 into buffers that stay in L1, the f32 kernel runs on them, and its result is
// rounded once into the output. That is what HalfInF32 (tensor/half_in_f32.h) computes with a
// whole-tensor copy per operand and a pass per conversion; here the conversions ride along with
// the kernel's own pass. Blocks are whole vectors of 16 floats, so a vectorised f32 kernel takes
// its vector and scalar paths on the same elements as over the whole widened run, and the bits
// are the same.
#ifndef KILN_BACKENDS_CPU_HALF_BLOCKS_H_
#define KILN_BACKENDS_CPU_HALF_BLOCKS_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "backends/cpu/half_convert.h"

namespace kiln::cpu {

inline constexpr int64_t kHalfBlock = 1024;

// f(inputs, output, m) over [0, n) in blocks of at most kHalfBlock: `inputs` holds the N
// operands' block widened to f32, f writes m f32 results to `output`, which are rounded into
// out. The operands are contiguous runs of n values.
template <size_t N, class H, class F>
void InF32Blocks(const std::array<const H*, N>& in, H* out, int64_t n, F f) {
  alignas(64) float widened[N][kHalfBlock];
  alignas(64) float result[kHalfBlock];
  std::array<const float*, N> blocks;
  for (size_t k = 0; k < N; ++k) blocks[k] = widened[k];
  for (int64_t i = 0; i < n; i += kHalfBlock) {
    const int64_t m = std::min(kHalfBlock, n - i);
    for (size_t k = 0; k < N; ++k) HalfToFloat(in[k] + i, 1, widened[k], m);
    f(blocks, result, m);
    FloatToHalf(result, 1, out + i, m);
  }
}

// n values of `scratch` from `offset` values past a 64-byte boundary, resized as needed. Eigen's
// loops over a run (a softmax's max, a sum) start their vector path at its first aligned element,
// so a run's bits depend on its address modulo 64 bytes: scratch placed where the values sit in
// a whole tensor (64-byte aligned, backends/cpu/allocator.h) gives the same bits, and the bits
// never depend on where malloc put the scratch.
template <class T>
T* ScratchAt(std::vector<T>& scratch, int64_t n, int64_t offset) {
  constexpr int64_t kPerLine = 64 / sizeof(T);
  scratch.resize(n + 2 * kPerLine);
  const auto address = reinterpret_cast<uintptr_t>(scratch.data());
  return scratch.data() + (kPerLine - address / sizeof(T) % kPerLine) % kPerLine + offset % kPerLine;
}

}  // namespace kiln::cpu

#endif  // KILN_BACKENDS_CPU_HALF_BLOCKS_H_
