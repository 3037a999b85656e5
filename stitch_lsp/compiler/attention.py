"""Flash-style attention for bf16/fp16: softmax(q k^T * scale [+ mask]) v in one kernel.

One CTA of 4 warps takes 64 query rows of one (batch, head); each warp owns 16 rows, keeps them
as tensor-core A fragments and walks the keys 64 at a time: S = Q K^T on `mma.sync m16n8k16`
(fp32 accumulation), the causal / boolean / additive mask, an online softmax (running max and
sum per row, kept in fp32), then O += P V with P rounded to the input type, as FlashAttention-2
does. Q K^T never reaches memory; the output is written once, in the input type, as (batch,
query, head, value): the layout the output projection reads, so no transpose copy follows. Key/value
heads shared by several query heads (GQA) are read in place, never repeated; with few query rows
(a decode step) one tile holds the whole group's rows, so each key/value tile is read once per
group (PACK).

The key and value tiles are double-buffered in shared memory: `cp.async` streams the next pair in
while the tensor cores work on this one. Fragments come from shared memory by `ldmatrix` (one
instruction feeds two MMAs), V's through `ldmatrix.trans`, so V is stored as it lies in memory.
Scores are kept in log2 units (scale * log2 e folded into one multiply) so each softmax term is
one exp2.

The kernel is one template in the generated file; each attention site is a launcher that
instantiates it with the site's head sizes, mask kind and strides (shapes are fixed at
generation time, as for every generated kernel). Torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass

from stitch_lsp.compiler import layout
from stitch_lsp.compiler.ir import Node, Use
from stitch_lsp.compiler.target import ASSUMED_SMS

ATTENTION_PREAMBLE = r"""
// ---- flash attention (bf16/fp16 in, fp32 accumulation): see stitch_lsp/compiler/attention.py ----
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>
struct StitchAttnDims {
  int heads, group, lq, lk;       // group: query heads per key/value head (GQA)
  long long q_b, q_h, q_l;        // element strides; the last dim of q, k, v is contiguous
  long long k_b, k_h, k_l;
  long long v_b, v_h, v_l;
  long long m_b, m_h, m_l, m_s;   // mask strides, 0 where it broadcasts
  long long m_period;             // the mask repeats every m_period batches (Swin's windows)
  float scale;
  int splits, kchunk;             // split-KV: key ranges of kchunk keys per CTA (see below)
};
template <typename T> __device__ __forceinline__ uint32_t stitch_pack2(float a, float b);
template <> __device__ __forceinline__ uint32_t stitch_pack2<__nv_bfloat16>(float a, float b) {
  __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <> __device__ __forceinline__ uint32_t stitch_pack2<__half>(float a, float b) {
  __half2 v = __floats2half2_rn(a, b);
  return *reinterpret_cast<uint32_t*>(&v);
}
// D (16x8, fp32) += A (16x16, row) * B (16x8, col) on the tensor cores.
template <typename T>
__device__ __forceinline__ void stitch_mma16816(float* c, const uint32_t* a, uint32_t b0,
                                                uint32_t b1);
template <>
__device__ __forceinline__ void stitch_mma16816<__nv_bfloat16>(float* c, const uint32_t* a,
                                                               uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void stitch_mma16816<__half>(float* c, const uint32_t* a, uint32_t b0,
                                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// Four (or two) 8x8 b16 matrices from shared memory, one row address per lane; .trans hands
// each lane a column pair instead of a row pair (P V's B operand from V stored row-major).
__device__ __forceinline__ void stitch_ldsm4(uint32_t* r, const unsigned short* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void stitch_ldsm2(uint32_t* r, const unsigned short* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
__device__ __forceinline__ void stitch_ldsm4t(uint32_t* r, const unsigned short* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}
__device__ __forceinline__ void stitch_ldsm2t(uint32_t* r, const unsigned short* p) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(p);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(a));
}
// 16 bytes global -> shared without passing through registers; zeros when `full` is false.
__device__ __forceinline__ void stitch_cp16(unsigned short* s, const unsigned short* g, bool full) {
  const uint32_t a = (uint32_t)__cvta_generic_to_shared(s);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
               :: "r"(a), "l"(g), "r"(full ? 16 : 0));
}
__device__ __forceinline__ void stitch_cp_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N> __device__ __forceinline__ void stitch_cp_wait() {
  asm volatile("cp.async.wait_group %0;\n" :: "n"(N));
}
__device__ __forceinline__ float stitch_mask_f(bool x) { return x ? 1.f : 0.f; }
__device__ __forceinline__ float stitch_mask_f(float x) { return x; }
__device__ __forceinline__ float stitch_mask_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float stitch_mask_f(__half x) { return __half2float(x); }
// Threads a flash CTA has (its launches and __launch_bounds__ say so too): a constant stride lets
// the loaders unroll, so a thread's loads are all in flight before the first store waits.
#define STITCH_ATTN_THREADS 128
// Rows r0.. of a (64 x W) tile into shared memory (row pitch P), zeros past row n: with VEC
// (16-byte aligned rows) as cp.async copies that land while the tensor cores work on the
// previous tile, else element by element.
template <int W, int P, bool VEC>
__device__ __forceinline__ void stitch_attn_rows(unsigned short* s, const unsigned short* g,
                                                 long long ld, int r0, int n) {
  if (VEC) {
    constexpr int C = W / 8;
#pragma unroll
    for (int i = threadIdx.x; i < 64 * C; i += STITCH_ATTN_THREADS) {
      const int r = i / C, c = (i % C) * 8;
      const bool in = r0 + r < n;
      stitch_cp16(s + r * P + c, g + (in ? (r0 + r) * ld + c : 0), in);
    }
  } else {
#pragma unroll 8
    for (int i = threadIdx.x; i < 64 * W; i += STITCH_ATTN_THREADS) {
      const int r = i / W, c = i % W;
      s[r * P + c] = r0 + r < n ? g[(r0 + r) * ld + c] : (unsigned short)0;
    }
  }
}
// With PACK (grouped-query attention over few query rows: a decode step), a tile's 64 rows are
// the (query head, query row) pairs of one key/value head's group, row p being head p / lq of the
// group at query row p % lq: K and V are read once per group instead of once per query head.
// Rows r0.. of that packed Q into shared memory (row pitch P), zeros past the group's rows.
template <int W, int P, bool VEC>
__device__ __forceinline__ void stitch_attn_packed_q(unsigned short* s, const unsigned short* q,
                                                     const StitchAttnDims& d, int hk, int r0) {
  constexpr int C = VEC ? W / 8 : W;
  const int n = d.group * d.lq;
#pragma unroll 8
  for (int i = threadIdx.x; i < 64 * C; i += STITCH_ATTN_THREADS) {
    const int r = i / C, c = (i % C) * (VEC ? 8 : 1);
    const int p = r0 + r;
    const bool in = p < n;
    const long long at = in ? (hk * d.group + p / d.lq) * d.q_h + (p % d.lq) * d.q_l + c : 0;
    if (VEC) {
      stitch_cp16(s + r * P + c, q + at, in);
    } else {
      s[r * P + c] = in ? q[at] : (unsigned short)0;
    }
  }
}
// MASK: 0 none, 1 boolean (keep where nonzero), 2 additive. Grid: (ceil(rows / 64) * splits,
// heads (key/value heads with PACK), batch). With SPLIT (few query rows, many keys: a decode
// step) each CTA takes kchunk keys and writes its rows' running max (log2 units), sum and
// unnormalised output in fp32 to `part`; stitch_flash_combine merges the splits. Shared memory
// (dynamic): two K tiles and two V tiles, 64 rows each, double-buffered; the query tile borrows
// the second K buffer first.
template <typename T, int D, int DV, bool CAUSAL, int MASK, typename MT, bool VEC, bool SPLIT,
          bool PACK>
__global__ void __launch_bounds__(STITCH_ATTN_THREADS)
stitch_flash_attn(const T* __restrict__ q_, const T* __restrict__ k_, const T* __restrict__ v_,
                  const MT* __restrict__ mask, T* __restrict__ out, float* __restrict__ part,
                  StitchAttnDims d) {
  constexpr int KP = D + 8, VP = DV + 8;  // +8: ldmatrix rows fall in distinct banks
  constexpr float LOG2E = 1.4426950408889634f;
  extern __shared__ __align__(16) unsigned short stitch_attn_smem[];
  unsigned short* const ks = stitch_attn_smem;             // K tiles: ks + buf * 64 * KP
  unsigned short* const vs = stitch_attn_smem + 128 * KP;  // V tiles: vs + buf * 64 * VP
  const int split = SPLIT ? (int)(blockIdx.x % d.splits) : 0;
  const int b = blockIdx.z;
  const int m0 = (SPLIT ? (int)(blockIdx.x / d.splits) : (int)blockIdx.x) * 64;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int hk = PACK ? (int)blockIdx.y : (int)blockIdx.y / d.group;
  const unsigned short* q = reinterpret_cast<const unsigned short*>(q_) + b * d.q_b;
  const unsigned short* k = reinterpret_cast<const unsigned short*>(k_) + b * d.k_b + hk * d.k_h;
  const unsigned short* v = reinterpret_cast<const unsigned short*>(v_) + b * d.v_b + hk * d.v_h;
  // This thread's two rows of the tile: whether each is a row at all, its query row and head.
  const int rows = PACK ? d.group * d.lq : d.lq;
  const int p0 = m0 + warp * 16 + g;
  const int pr[2] = {p0, p0 + 8};
  bool valid[2];
  int qrow[2], head[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    valid[i] = pr[i] < rows;
    qrow[i] = PACK ? pr[i] % d.lq : pr[i];
    head[i] = PACK ? hk * d.group + min(pr[i] / d.lq, d.group - 1) : (int)blockIdx.y;
  }
  const int kbeg = split * d.kchunk;
  // causal: no key past the tile's last query row (any row of the group's with PACK)
  const int klast = CAUSAL ? min(d.lk, PACK ? d.lq : m0 + 64) : d.lk;
  const int kend = min(klast, (split + 1) * d.kchunk);
  if (PACK) {
    stitch_attn_packed_q<D, KP, VEC>(ks + 64 * KP, q, d, hk, m0);
  } else {
    stitch_attn_rows<D, KP, VEC>(ks + 64 * KP, q + blockIdx.y * d.q_h, d.q_l, m0, d.lq);
  }
  stitch_cp_commit();
  if (kbeg < kend) {
    stitch_attn_rows<D, KP, VEC>(ks, k, d.k_l, kbeg, d.lk);
    stitch_attn_rows<DV, VP, VEC>(vs, v, d.v_l, kbeg, d.lk);
  }
  stitch_cp_commit();
  stitch_cp_wait<1>();
  __syncthreads();
  // Q as A fragments, kept in registers: lanes 0-15 give rows 0-15 at column 16kk, 16-31 at +8.
  uint32_t qa[D / 16][4];
#pragma unroll
  for (int kk = 0; kk < D / 16; ++kk)
    stitch_ldsm4(qa[kk], ks + (64 + warp * 16 + (lane & 15)) * KP + 16 * kk + 8 * (lane >> 4));
  __syncthreads();
  float o[DV / 8][4];
#pragma unroll
  for (int n = 0; n < DV / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float mrow[2] = {-INFINITY, -INFINITY}, lrow[2] = {0.f, 0.f};
  const float sl2 = d.scale * LOG2E;  // scores kept in log2 units: exp2 of a difference
  int buf = 0;
  for (int n0 = kbeg; n0 < kend; n0 += 64, buf ^= 1) {
    if (n0 + 64 < kend) {  // the next tile streams in while this one is computed
      stitch_attn_rows<D, KP, VEC>(ks + (buf ^ 1) * 64 * KP, k, d.k_l, n0 + 64, d.lk);
      stitch_attn_rows<DV, VP, VEC>(vs + (buf ^ 1) * 64 * VP, v, d.v_l, n0 + 64, d.lk);
      stitch_cp_commit();
      stitch_cp_wait<1>();
    } else {
      stitch_cp_wait<0>();
    }
    __syncthreads();
    const unsigned short* kt = ks + buf * 64 * KP;
    const unsigned short* vt = vs + buf * 64 * VP;
    float s[8][4];
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
      // K rows 8j.. as B fragments: lanes 0-7, 8-15, 16-23, 24-31 address columns +0, +8, +16, +24.
      const unsigned short* kr = kt + (8 * j + (lane & 7)) * KP + 8 * (lane >> 3);
#pragma unroll
      for (int kk = 0; kk + 1 < D / 16; kk += 2) {
        uint32_t kb[4];
        stitch_ldsm4(kb, kr + 16 * kk);
        stitch_mma16816<T>(s[j], qa[kk], kb[0], kb[1]);
        stitch_mma16816<T>(s[j], qa[kk + 1], kb[2], kb[3]);
      }
      if ((D / 16) % 2) {
        uint32_t kb[2];
        stitch_ldsm2(kb, kt + (8 * j + (lane & 7)) * KP + D - 16 + 8 * ((lane >> 3) & 1));
        stitch_mma16816<T>(s[j], qa[D / 16 - 1], kb[0], kb[1]);
      }
    }
    // Per-element checks only on tiles that reach past the keys or the diagonal, or carry a mask.
    const bool edge = n0 + 64 > d.lk || (CAUSAL && (PACK || n0 + 63 > m0)) || MASK != 0;
    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[j][e] * sl2;
        if (edge) {
          const int i = e >> 1, row = qrow[i], col = n0 + 8 * j + 2 * t + (e & 1);
          if (col >= d.lk || (CAUSAL && col > row)) x = -INFINITY;
          if (MASK != 0 && valid[i] && col < d.lk) {
            const float mv = stitch_mask_f(
                mask[(b % d.m_period) * d.m_b + head[i] * d.m_h + (long long)row * d.m_l +
                     (long long)col * d.m_s]);
            if (MASK == 1 && mv == 0.f) x = -INFINITY;
            if (MASK == 2) x += mv * LOG2E;
          }
        }
        s[j][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    }
    float alpha[2], base[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
      mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
      const float m_new = fmaxf(mrow[i], mx[i]);
      base[i] = m_new == -INFINITY ? 0.f : m_new;  // a row masked so far adds zeros
      alpha[i] = exp2f(mrow[i] - base[i]);
      mrow[i] = m_new;
      lrow[i] *= alpha[i];
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[j][e] = exp2f(s[j][e] - base[e >> 1]);
        lrow[e >> 1] += s[j][e];
      }
    }
#pragma unroll
    for (int n = 0; n < DV / 8; ++n) {
      o[n][0] *= alpha[0];
      o[n][1] *= alpha[0];
      o[n][2] *= alpha[1];
      o[n][3] *= alpha[1];
    }
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t pa[4] = {
          stitch_pack2<T>(s[2 * kk][0], s[2 * kk][1]),
          stitch_pack2<T>(s[2 * kk][2], s[2 * kk][3]),
          stitch_pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
          stitch_pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3]),
      };
      // V rows 16kk.. (keys) as B fragments, transposed by ldmatrix: lanes 0-7 keys +0..7,
      // 8-15 keys +8..15, each at value columns 8n; lanes 16-31 the same at 8n + 8.
      const unsigned short* vr =
          vt + (16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * VP + 8 * (lane >> 4);
#pragma unroll
      for (int n = 0; n + 1 < DV / 8; n += 2) {
        uint32_t vb[4];
        stitch_ldsm4t(vb, vr + 8 * n);
        stitch_mma16816<T>(o[n], pa, vb[0], vb[1]);
        stitch_mma16816<T>(o[n + 1], pa, vb[2], vb[3]);
      }
      if ((DV / 8) % 2) {
        uint32_t vb[2];
        stitch_ldsm2t(vb, vt + (16 * kk + (lane & 7) + 8 * ((lane >> 3) & 1)) * VP + DV - 8);
        stitch_mma16816<T>(o[DV / 8 - 1], pa, vb[0], vb[1]);
      }
    }
    __syncthreads();  // this buffer is refilled two tiles on
  }
  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    lrow[i] += __shfl_xor_sync(0xffffffffu, lrow[i], 1);
    lrow[i] += __shfl_xor_sync(0xffffffffu, lrow[i], 2);
    inv[i] = lrow[i] > 0.f ? 1.f / lrow[i] : 0.f;  // a row with every key masked: zeros
  }
  if (SPLIT) {  // part: per (row, split) DV outputs, then the max (log2 units) and the sum
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      if (!valid[i]) continue;
      const long long at = ((long long)b * d.heads + head[i]) * d.lq + qrow[i];
      float* p = part + (at * d.splits + split) * (DV + 2);
#pragma unroll
      for (int n = 0; n < DV / 8; ++n) {
        p[8 * n + 2 * t] = o[n][2 * i];
        p[8 * n + 2 * t + 1] = o[n][2 * i + 1];
      }
      if (t == 0) {
        p[DV] = mrow[i];
        p[DV + 1] = lrow[i];
      }
    }
    return;
  }
  // out is (batch, query, head, value): row r of head h at ((b * lq + r) * heads + h) * DV.
  uint32_t* o32 = reinterpret_cast<uint32_t*>(out);
  const long long at0 = ((long long)b * d.lq + qrow[0]) * d.heads + head[0];
  const long long at1 = ((long long)b * d.lq + qrow[1]) * d.heads + head[1];
#pragma unroll
  for (int n = 0; n < DV / 8; ++n) {
    const int c = 8 * n + 2 * t;
    if (valid[0])
      o32[(at0 * DV + c) >> 1] = stitch_pack2<T>(o[n][0] * inv[0], o[n][1] * inv[0]);
    if (valid[1])
      o32[(at1 * DV + c) >> 1] = stitch_pack2<T>(o[n][2] * inv[1], o[n][3] * inv[1]);
  }
}
"""


# Merges the key splits of a decode step; in the file only where some launch splits.
COMBINE_KERNEL = r"""
// The splits of each row merged: weights 2^(m_s - max) (maxima in log2 units), output
// sum(w O_s) / sum(w l_s). DV / 2 threads per (batch, head, row), two columns each, and
// blockDim.y rows per block: blocks of one row (32 threads at head 64) leave the SMs idle
// between tiny blocks. SPLITS is a constant, so both loops unroll and every split's loads are
// in flight at once instead of one round trip to memory per split.
template <typename T, int DV, int SPLITS>
__global__ void __launch_bounds__(128)
stitch_flash_combine(const float* __restrict__ part, T* __restrict__ out, int heads, int lq,
                     int rows) {
  const int r = blockIdx.x * blockDim.y + threadIdx.y;
  if (r >= rows) return;
  const float* p = part + (long long)r * SPLITS * (DV + 2);
  const long long row = r % lq, bh = r / lq;
  const long long at = ((bh / heads) * lq + row) * heads + bh % heads;
  const int c = 2 * threadIdx.x;
  float ms[SPLITS], ls[SPLITS], x0[SPLITS], x1[SPLITS];
#pragma unroll
  for (int s = 0; s < SPLITS; ++s) {
    const float* ps = p + s * (DV + 2);
    ms[s] = ps[DV];
    ls[s] = ps[DV + 1];
    x0[s] = ps[c];
    x1[s] = ps[c + 1];
  }
  float m = -INFINITY;
#pragma unroll
  for (int s = 0; s < SPLITS; ++s) m = fmaxf(m, ms[s]);
  float l = 0.f, a0 = 0.f, a1 = 0.f;
#pragma unroll
  for (int s = 0; s < SPLITS; ++s) {
    const float w = ms[s] == -INFINITY ? 0.f : exp2f(ms[s] - m);
    l += w * ls[s];
    a0 += w * x0[s];
    a1 += w * x1[s];
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  reinterpret_cast<uint32_t*>(out)[(at * DV + c) >> 1] = stitch_pack2<T>(a0 * inv, a1 * inv);
}
"""

# A launch of at least ASSUMED_SMS CTAs has one per SM: splitting its keys buys little
# parallelism and costs the combine's launch and the fp32 partials' round trip (ViT-S's 197 keys
# in two splits on an H200: 12.9 us of flash kernel plus 7.5 us of combine, against cuDNN's
# 6.2 us). With fewer CTAs, keys are split (flash-decoding) until about twice that many run.
SPLIT_TARGET_CTAS = 2 * ASSUMED_SMS
# The combine keeps each split's max, sum and two outputs in registers: at most this many.
MAX_SPLITS = 64
# Threads per combine block (several rows of DV / 2 threads each).
COMBINE_THREADS = 128


# Dynamic shared memory a launch may use without cudaFuncSetAttribute.
DEFAULT_SMEM_BYTES = 48 * 1024


def flash_smem_bytes(d: int, dv: int) -> int:
    """Two 64-row K tiles and two V tiles (double buffering), rows padded by 8 elements."""
    return 2 * 64 * ((d + 8) + (dv + 8)) * 2


@dataclass
class AttentionLaunch:
    """A launcher's source, what its comment says, and the fp32 workspace its splits need."""

    source: str
    comment: str
    ws_bytes: int


def packs_query_heads(group: int, lq: int) -> bool:
    """Whether a CTA's tile holds the query heads of one key/value head's group: with fewer than
    64 query rows a tile is mostly empty, and each query head would read the same K and V."""
    return group > 1 and lq < 64


def key_splits(ctas: int, lk: int) -> tuple[int, int]:
    """(splits, keys per split): one split unless the grid has fewer CTAs than the GPU has SMs
    and there are keys to share out (at least two 64-key tiles per split)."""
    tiles = -(-lk // 64)
    if ctas >= ASSUMED_SMS or tiles < 4:
        return 1, tiles * 64
    want = min(tiles // 2, -(-SPLIT_TARGET_CTAS // ctas), MAX_SPLITS)
    per = -(-tiles // max(want, 1))
    return -(-tiles // per), per * 64


def attention_launcher(
    node: Node, name: str, params: list[tuple[str, str, int]], out: str, ctype: str
) -> AttentionLaunch:
    """`extern "C" int name(...)`: the flash kernel for one attention site.

    params: (C type, argument name, vid) of the kernel's inputs, in the launcher's order;
    each of q, k, v (and the mask) names one of them by vid (q, k, v may be one tensor). A split
    launch takes a workspace `ws` after the output."""
    q, k, v, *rest = node.uses
    mask = rest[0] if rest else None
    arg = {vid: nm for _, nm, vid in params}
    mask_kind = str(node.params.get("mask") or "")
    b, lq, heads, dv = node.shape
    e, lk, kv_heads = q.shape[-1], k.shape[-2], k.shape[1]

    def at(u: Use) -> str:
        return f"{arg[u.vid]} + {u.offset}" if u.offset else arg[u.vid]

    def strides(u: Use) -> list[int]:
        return list(layout.strides_of(u)[:3])

    sq, sk, sv = strides(q), strides(k), strides(v)
    sm = list(layout.strides_of(mask)) if mask is not None else [0, 0, 0, 0]
    # A mask over fewer batches than the attention repeats (its batch b % period): Swin's
    # shifted-window mask, one per window, shared by every image.
    period = mask.shape[0] if mask is not None else 1
    scale = float(node.params["scale"])  # type: ignore[arg-type]
    group = heads // kv_heads
    pack = packs_query_heads(group, lq)
    m_tiles = -(-(group * lq if pack else lq) // 64)
    grid_heads = kv_heads if pack else heads
    splits, chunk = key_splits(m_tiles * grid_heads * b, lk)
    dims = [heads, group, lq, lk, *sq, *sk, *sv, *sm, period]
    init = ", ".join(str(x) for x in dims) + f", {scale!r}f, {splits}, {chunk}"
    mask_type = "bool"
    mask_ptr = "nullptr"
    if mask is not None:
        mask_type = next(c for c, _, vid in params if vid == mask.vid)
        mask_type = mask_type.replace("const", "").replace("*", "").replace("__restrict__", "")
        mask_type = mask_type.strip()
        mask_ptr = at(mask)
    kind = {"": 0, "bool": 1, "add": 2}[mask_kind]
    causal = "true" if node.params.get("causal") else "false"
    rows_even = all(s[2] % 8 == 0 and s[0] % 8 == 0 and s[1] % 8 == 0 for s in (sq, sk, sv))
    offsets_even = all(u.offset % 8 == 0 for u in (q, k, v))
    vec_static = "true" if rows_even and offsets_even else "false"
    ptrs = " && ".join(dict.fromkeys(f"stitch_aligned16({arg[u.vid]})" for u in (q, k, v)))
    sig = ", ".join(f"{c} {nm}" for c, nm, _ in params)
    split = splits > 1
    part = "(float*)ws" if split else "nullptr"
    ws_bytes = b * heads * lq * splits * (dv + 2) * 4 if split else 0

    def kernel(vec: str) -> str:
        flags = f"{str(split).lower()}, {str(pack).lower()}"
        tmpl = f"{ctype}, {e}, {dv}, {causal}, {kind}, {mask_type}, {vec}, {flags}"
        return f"stitch_flash_attn<{tmpl}>"

    def launch(vec: str) -> str:
        return (
            f"{kernel(vec)}<<<grid, STITCH_ATTN_THREADS, {smem}, stream>>>("
            f"{at(q)}, {at(k)}, {at(v)}, {mask_ptr}, {out}, {part}, d);"
        )

    smem = flash_smem_bytes(e, dv)
    ws_param = ", unsigned char* ws" if split else ""
    lines = [
        f'extern "C" int {name}({sig}, {ctype}* {out}{ws_param}, cudaStream_t stream) {{',
        f"  const StitchAttnDims d = {{{init}}};",
        f"  const dim3 grid({m_tiles * splits}, {grid_heads}, {b});",
    ]
    if smem > DEFAULT_SMEM_BYTES:  # more than a launch gets unasked: raised once per process
        attr = "cudaFuncAttributeMaxDynamicSharedMemorySize"
        lines += [
            "  static bool smem_raised = false;",
            "  if (!smem_raised) {",
            *(f"    cudaFuncSetAttribute({kernel(v)}, {attr}, {smem});" for v in ("true", "false")),
            "    smem_raised = true;",
            "  }",
        ]
    lines += [
        f"  if ({vec_static} && {ptrs}) {launch('true')}",
        f"  else {launch('false')}",
    ]
    if split:
        rows = b * heads * lq
        per_block = max(1, COMBINE_THREADS // (dv // 2))
        lines.append(
            f"  stitch_flash_combine<{ctype}, {dv}, {splits}><<<{-(-rows // per_block)}, "
            f"dim3({dv // 2}, {per_block}), 0, stream>>>("
            f"(const float*)ws, {out}, {heads}, {lq}, {rows});"
        )
    lines += ["  return (int)cudaGetLastError();", "}"]
    what = "causal " if node.params.get("causal") else ""
    what += {"": "", "bool": "boolean-masked ", "add": "additive-masked "}[mask_kind]
    if 1 < period < b:
        what += f"(the mask repeating every {period} batches) "
    gqa = f", {group} query heads per KV head" if kv_heads != heads else ""
    gqa += ", the group's heads packed into tiles" if pack else ""
    keys = f", keys in {splits} splits of {chunk}" if split else ""
    comment = (
        f"{node.origin or 'scaled_dot_product_attention'}: {what}flash attention "
        f"(q k^T, softmax, @ v in one pass; {b}x{heads} heads, {lq}x{lk}, head {e}{gqa}{keys})"
    )
    return AttentionLaunch("\n".join(lines), comment, ws_bytes)
