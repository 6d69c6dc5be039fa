#version 450
#extension GL_GOOGLE_include_directive : require
// C[z] = A[z] x B[z] for z in [0, batch): A [M, K] and B [K, N] are strided views (so
// transposes need no copy; a batch stride of 0 broadcasts), C is dense [batch, M, N]. Each
// 16x16 workgroup computes a 64x64 tile of C through shared-memory tiles of A and B, each
// invocation a 4x4 block held in registers.
#include "common.glsl"
layout(local_size_x = 16, local_size_y = 16) in;
layout(push_constant, std430) uniform Params {
  uint64_t c, a, b;
  int m, n, k, batch;
  int a_rs, a_cs, a_bs, b_rs, b_cs, b_bs;
} p;

const int kTile = 64, kDepth = 16;
shared T a_tile[kDepth][kTile + 1];
shared T b_tile[kDepth][kTile + 1];

void main() {
  const int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  const int tid = ty * 16 + tx;
  const int row0 = int(gl_WorkGroupID.y) * kTile, col0 = int(gl_WorkGroupID.x) * kTile;
  for (int z = int(gl_WorkGroupID.z); z < p.batch; z += int(gl_NumWorkGroups.z)) {
    T acc[4][4];
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 4; ++j) acc[i][j] = T(0);
    const int a_base = z * p.a_bs, b_base = z * p.b_bs;
    for (int k0 = 0; k0 < p.k; k0 += kDepth) {
      for (int l = 0; l < 4; ++l) {
        const int e = tid + l * 256;
        const int ar = e / kDepth, ak = e % kDepth;  // A: 64 rows x 16 depth
        const int gr = row0 + ar, gk = k0 + ak;
        a_tile[ak][ar] = gr < p.m && gk < p.k ? TS(p.a).v[a_base + gr * p.a_rs + gk * p.a_cs] : T(0);
        const int bk = e / kTile, bc = e % kTile;  // B: 16 depth x 64 columns
        const int hk = k0 + bk, gc = col0 + bc;
        b_tile[bk][bc] = hk < p.k && gc < p.n ? TS(p.b).v[b_base + hk * p.b_rs + gc * p.b_cs] : T(0);
      }
      barrier();
      for (int kk = 0; kk < kDepth; ++kk) {
        T av[4], bv[4];
        for (int i = 0; i < 4; ++i) av[i] = a_tile[kk][ty + 16 * i];
        for (int j = 0; j < 4; ++j) bv[j] = b_tile[kk][tx + 16 * j];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
      }
      barrier();
    }
    for (int i = 0; i < 4; ++i) {
      const int r = row0 + ty + 16 * i;
      if (r >= p.m) continue;
      for (int j = 0; j < 4; ++j) {
        const int col = col0 + tx + 16 * j;
        if (col < p.n) TS(p.c).v[(z * p.m + r) * p.n + col] = acc[i][j];
      }
    }
  }
}
