#version 450
#extension GL_GOOGLE_include_directive : require
// out (zeroed, dense) += src at each position with its `dim` coordinate replaced by index
// there (rank <= 5). Atomic: floats by compare-and-swap on their bits (32-bit atomics are
// core Vulkan; f64 needs 64-bit atomics), so the order of the additions is not fixed.
#include "common.glsl"
#extension GL_EXT_shader_atomic_int64 : enable
layout(local_size_x = WORKGROUP) in;
layout(push_constant, std430) uniform Params {
  uint64_t out_, src, index;
  int n, rank, dim, dim_size;
  int shape[5], src_strides[5], index_strides[5], out_strides[5];
} p;

void main() {
  for (uint i = Linear(); i < uint(p.n); i += Stride()) {
    uint rem = i;
    int s = 0, ix = 0, o = 0;
    // Dim 0 needs no division (rem < shape[0]): a contiguous run divides nowhere.
    for (int k = p.rank - 1; k > 0; --k) {
      const uint c = rem % uint(p.shape[k]);
      rem /= uint(p.shape[k]);
      s += int(c) * p.src_strides[k];
      ix += int(c) * p.index_strides[k];
      if (k != p.dim) o += int(c) * p.out_strides[k];
    }
    if (p.rank > 0) {
      const int k = 0;
      const uint c = rem;
      s += int(c) * p.src_strides[k];
      ix += int(c) * p.index_strides[k];
      if (k != p.dim) o += int(c) * p.out_strides[k];
    }
    const int64_t j = clamp(I64s(p.index).v[ix], 0l, int64_t(p.dim_size - 1));
    o += int(j) * p.out_strides[p.dim];
    const T x = TS(p.src).v[s];
  #if defined(KIND_F) && defined(F64)
    uint64_t seen = U64s(p.out_).v[o];
    for (;;) {
      const uint64_t want = doubleBitsToUint64(uint64BitsToDouble(seen) + x);
      const uint64_t found = atomicCompSwap(U64s(p.out_).v[o], seen, want);
      if (found == seen) break;
      seen = found;
    }
  #elif defined(KIND_F)
    uint seen = U32s(p.out_).v[o];
    for (;;) {
      const uint want = floatBitsToUint(uintBitsToFloat(seen) + x);
      const uint found = atomicCompSwap(U32s(p.out_).v[o], seen, want);
      if (found == seen) break;
      seen = found;
    }
  #else
    atomicAdd(TS(p.out_).v[o], x);
  #endif
  }
}
