"""CUDA text pasted into every candidate: math helpers, reduction states, launch sizing.

The math follows ATen's float kernels (same formulas, float accumulation; variance sums in
double), so results match the eager reference well inside KernelBench's 1e-4 tolerance.
"""

from __future__ import annotations

import math

from stitch_lsp.compiler.catalog import EW

PREAMBLE = r"""
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>

// ---- launch sizing: grids are sized from the SM count of the current device ----
static int stitch_sm_count() {
  static int counts[64] = {0};
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev < 0 || dev >= 64) return 132;
  if (counts[dev] == 0) {
    int n = 0;
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    counts[dev] = n > 0 ? n : 132;
  }
  return counts[dev];
}
static inline bool stitch_aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}
static inline int stitch_grid(long long items, int threads, int blocks_per_sm) {
  long long want = (items + threads - 1) / threads;
  long long cap = (long long)stitch_sm_count() * blocks_per_sm;
  if (want > cap) want = cap;
  return want < 1 ? 1 : (int)want;
}

// ---- elementwise math (float, as ATen's CUDA kernels compute it) ----
__device__ __forceinline__ float st_relu(float x) { return x > 0.f ? x : 0.f; }
__device__ __forceinline__ float st_relu6(float x) { return fminf(fmaxf(x, 0.f), 6.f); }
__device__ __forceinline__ float st_leaky_relu(float x, float s) { return x > 0.f ? x : x * s; }
__device__ __forceinline__ float st_elu(float x, float a) { return x > 0.f ? x : a * expm1f(x); }
__device__ __forceinline__ float st_selu(float x) {
  return 1.0507009873554804934193349852946f *
         (x > 0.f ? x : 1.6732632423543772848170429916717f * expm1f(x));
}
__device__ __forceinline__ float st_gelu(float x) {
  return 0.5f * x * (1.f + erff(x * 0.70710678118654752440f));
}
__device__ __forceinline__ float st_gelu_tanh(float x) {
  const float inner = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
  return 0.5f * x * (1.f + tanhf(inner));
}
__device__ __forceinline__ float st_sigmoid(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float st_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ float st_silu(float x) { return x / (1.f + expf(-x)); }
__device__ __forceinline__ float st_softplus(float x, float beta, float threshold) {
  return (x * beta) > threshold ? x : log1pf(expf(x * beta)) / beta;
}
__device__ __forceinline__ float st_mish(float x) { return x * tanhf(st_softplus(x, 1.f, 20.f)); }
__device__ __forceinline__ float st_hardswish(float x) {
  return x * fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f;
}
__device__ __forceinline__ float st_hardsigmoid(float x) {
  return fminf(fmaxf(x + 3.f, 0.f), 6.f) / 6.f;
}
__device__ __forceinline__ float st_hardtanh(float x, float lo, float hi) {
  return fminf(fmaxf(x, lo), hi);
}
__device__ __forceinline__ float st_clamp(float x, float lo, float hi) {
  return fminf(fmaxf(x, lo), hi);
}
__device__ __forceinline__ float st_clamp_min(float x, float lo) { return fmaxf(x, lo); }
__device__ __forceinline__ float st_clamp_max(float x, float hi) { return fminf(x, hi); }
__device__ __forceinline__ float st_lse_finish(float m, float s) {
  return isinf(m) ? m : m + logf(s);
}

// ---- reduction states: push one value, combine two partial states, shuffle across a warp ----
struct SumS {
  float v;
  __device__ static SumS id() { return {0.f}; }
  __device__ void push(float x) { v += x; }
  __device__ static SumS comb(SumS a, SumS b) { return {a.v + b.v}; }
  __device__ SumS shfl(int o) const { return {__shfl_xor_sync(0xffffffffu, v, o)}; }
};
// A sum kept in double: where an algebra rewrite replaced the reference's own order of fp32
// sums, the program can only be exact (see rewrites/linear.py, sum_before_linear).
struct SumD {
  double v;
  __device__ static SumD id() { return {0.0}; }
  __device__ void push(float x) { v += (double)x; }
  __device__ static SumD comb(SumD a, SumD b) { return {a.v + b.v}; }
  __device__ SumD shfl(int o) const { return {__shfl_xor_sync(0xffffffffu, v, o)}; }
};
struct MaxS {
  float v;
  __device__ static MaxS id() { return {-INFINITY}; }
  __device__ void push(float x) { v = fmaxf(v, x); }
  __device__ static MaxS comb(MaxS a, MaxS b) { return {fmaxf(a.v, b.v)}; }
  __device__ MaxS shfl(int o) const { return {__shfl_xor_sync(0xffffffffu, v, o)}; }
};
struct MinS {
  float v;
  __device__ static MinS id() { return {INFINITY}; }
  __device__ void push(float x) { v = fminf(v, x); }
  __device__ static MinS comb(MinS a, MinS b) { return {fminf(a.v, b.v)}; }
  __device__ MinS shfl(int o) const { return {__shfl_xor_sync(0xffffffffu, v, o)}; }
};
// Mean and biased variance by Welford's method in float (as ATen's norms), merged with Chan's
// formula; one read pass and no cancellation trouble.
struct MomS {
  float n, mean, m2;
  __device__ static MomS id() { return {0.f, 0.f, 0.f}; }
  __device__ void push(float x) {
    n += 1.f;
    const float d = x - mean;
    mean += d / n;
    m2 += d * (x - mean);
  }
  __device__ static MomS comb(MomS a, MomS b) {
    const float n = a.n + b.n;
    if (n == 0.f) return a;
    const float d = b.mean - a.mean;
    const float fb = b.n / n;
    return {n, a.mean + d * fb, a.m2 + b.m2 + d * d * a.n * fb};
  }
  __device__ MomS shfl(int o) const {
    return {__shfl_xor_sync(0xffffffffu, n, o), __shfl_xor_sync(0xffffffffu, mean, o),
            __shfl_xor_sync(0xffffffffu, m2, o)};
  }
  __device__ float var() const { return n > 0.f ? fmaxf(m2 / n, 0.f) : 0.f; }
};
// Online softmax statistics: running max m and sum of exp(x - m), in one pass.
struct SmxS {
  float m, s;
  __device__ static SmxS id() { return {-INFINITY, 0.f}; }
  __device__ void push(float x) {
    if (x > m) { s = s * expf(m - x) + 1.f; m = x; }
    else if (x != -INFINITY) { s += expf(x - m); }
  }
  __device__ static SmxS comb(SmxS a, SmxS b) {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.f};
    const float sa = a.m == -INFINITY ? 0.f : a.s * expf(a.m - m);
    const float sb = b.m == -INFINITY ? 0.f : b.s * expf(b.m - m);
    return {m, sa + sb};
  }
  __device__ SmxS shfl(int o) const {
    return {__shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o)};
  }
};

// Index of the first max (argmax) or min (argmin) along the reduced dim; NaN wins, as in ATen.
template <bool MAX>
struct ArgS {
  float v;
  int i;
  __device__ static ArgS id() { return {MAX ? -INFINITY : INFINITY, 0x7fffffff}; }
  // Branch-free (bitwise & and |, no short circuit), so the loads of the next elements can be
  // issued before this comparison is resolved.
  __device__ static bool better(float xv, int xi, float v, int i) {
    const bool xn = isnan(xv), vn = isnan(v), first = xi < i;
    const bool wins = MAX ? xv > v : xv < v;  // false when either is NaN
    return (xn & (!vn | first)) | (!xn & !vn & (wins | ((xv == v) & first)));
  }
  __device__ void push(float x, int j) {
    if (better(x, j, v, i)) { v = x; i = j; }
  }
  __device__ static ArgS comb(ArgS a, ArgS b) { return better(b.v, b.i, a.v, a.i) ? b : a; }
  __device__ ArgS shfl(int o) const {
    return {__shfl_xor_sync(0xffffffffu, v, o), __shfl_xor_sync(0xffffffffu, i, o)};
  }
};
typedef ArgS<true> ArgMaxS;
typedef ArgS<false> ArgMinS;

// Every thread of a 1-D block gets the combined state (warp shuffles, then one smem step).
template <typename T>
__device__ __forceinline__ T block_allreduce(T v, T* smem) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = T::comb(v, v.shfl(o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int nwarps = (blockDim.x + 31) >> 5;
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  T r = lane < nwarps ? smem[lane] : T::id();
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) r = T::comb(r, r.shfl(o));
  return r;
}

// Every thread of an aligned group of LANES lanes (one row of a packed row kernel) gets the
// group's combined state: shuffles only, no shared memory or barrier.
template <typename T, int LANES>
__device__ __forceinline__ T lanes_allreduce(T v) {
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1) v = T::comb(v, v.shfl(o));
  return v;
}

// Combine the partial states of a (TX x TY) block along y; every thread gets its column's result.
template <typename T, int TY, int TX>
__device__ __forceinline__ T column_allreduce(T v, T (*smem)[TX]) {
  __syncthreads();
  smem[threadIdx.y][threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.y == 0) {
#pragma unroll
    for (int y = 1; y < TY; ++y) v = T::comb(v, smem[y][threadIdx.x]);
    smem[0][threadIdx.x] = v;
  }
  __syncthreads();
  return smem[0][threadIdx.x];
}
"""

REDUCED_PREAMBLE = r"""
// ---- bf16 / fp16 storage: values convert to float at each load and back at each store ----
#include <cuda_bf16.h>
#include <cuda_fp16.h>
__device__ __forceinline__ float st_f(float x) { return x; }
__device__ __forceinline__ float st_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float st_f(__half x) { return __half2float(x); }
template <typename T> __device__ __forceinline__ T st_to(float x);
template <> __device__ __forceinline__ float st_to<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 st_to<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);  // round to nearest even, as PyTorch's casts
}
template <> __device__ __forceinline__ __half st_to<__half>(float x) { return __float2half(x); }
// An op's result as PyTorch stores it (rounded to T), kept in a float register.
template <typename T> __device__ __forceinline__ float st_round(float x) {
  return st_f(st_to<T>(x));
}
// Four consecutive values in one 8-byte access (the pointer 8-byte aligned), as float4 does
// for float: the vector path of the pointwise and row kernels.
__device__ __forceinline__ float4 st_ld4(const __nv_bfloat16* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 a = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.x));
  const float2 b = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u.y));
  return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ float4 st_ld4(const __half* p) {
  const uint2 u = *reinterpret_cast<const uint2*>(p);
  const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&u.x));
  const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&u.y));
  return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void st_st4(__nv_bfloat16* p, float a, float b, float c, float d) {
  __nv_bfloat162 lo = __floats2bfloat162_rn(a, b), hi = __floats2bfloat162_rn(c, d);
  uint2 u;
  u.x = *reinterpret_cast<unsigned int*>(&lo);
  u.y = *reinterpret_cast<unsigned int*>(&hi);
  *reinterpret_cast<uint2*>(p) = u;
}
__device__ __forceinline__ void st_st4(__half* p, float a, float b, float c, float d) {
  __half2 lo = __floats2half2_rn(a, b), hi = __floats2half2_rn(c, d);
  uint2 u;
  u.x = *reinterpret_cast<unsigned int*>(&lo);
  u.y = *reinterpret_cast<unsigned int*>(&hi);
  *reinterpret_cast<uint2*>(p) = u;
}
"""

CUBLAS_PREAMBLE = r"""
#include <cublas_v2.h>

// One cuBLAS handle per device, created on first use. GEMMs ask for CUBLAS_COMPUTE_32F (no
// TF32), as eager PyTorch computes with allow_tf32 off.
static const size_t STITCH_CUBLAS_WORKSPACE = 32u << 20;
// The handle bound to `stream`, with an explicit workspace allocated on the first call (a plain
// warm-up call, before any CUDA graph capture): cuBLAS then never allocates while a graph is
// being captured, and replays reuse the same workspace.
static cublasHandle_t stitch_cublas_on(cudaStream_t stream) {
  static cublasHandle_t handles[64] = {nullptr};
  static void* spaces[64] = {nullptr};
  int dev = 0;
  cudaGetDevice(&dev);
  if (dev < 0 || dev >= 64) return nullptr;
  if (handles[dev] == nullptr) {
    if (cublasCreate(&handles[dev]) != CUBLAS_STATUS_SUCCESS) return nullptr;
  }
  if (spaces[dev] == nullptr) {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    cudaStreamIsCapturing(stream, &capturing);
    if (capturing != cudaStreamCaptureStatusNone) return nullptr;  // warm up before capturing
    if (cudaMalloc(&spaces[dev], STITCH_CUBLAS_WORKSPACE) != cudaSuccess) {
      spaces[dev] = nullptr;
      return nullptr;
    }
  }
  if (cublasSetStream(handles[dev], stream) != CUBLAS_STATUS_SUCCESS) return nullptr;
  // cublasSetStream resets the workspace to cuBLAS's own pool: set ours again after it.
  if (cublasSetWorkspace(handles[dev], spaces[dev], STITCH_CUBLAS_WORKSPACE) !=
      CUBLAS_STATUS_SUCCESS) {
    return nullptr;
  }
  return handles[dev];
}
#define STITCH_CUBLAS_ERROR 10000
"""

CUBLASLT_PREAMBLE = r"""
#include <cublasLt.h>

// cuBLASLt handle and a 32 MiB workspace per device, for GEMMs with a fused bias epilogue.
static cublasLtHandle_t stitch_cublaslt() {
  static cublasLtHandle_t handles[64] = {nullptr};
  int dev = 0;
  cudaGetDevice(&dev);
  if (handles[dev] == nullptr && cublasLtCreate(&handles[dev]) != CUBLAS_STATUS_SUCCESS) {
    return nullptr;
  }
  return handles[dev];
}
static const size_t STITCH_LT_WORKSPACE = 32u << 20;
static void* stitch_lt_workspace() {
  static void* spaces[64] = {nullptr};
  int dev = 0;
  cudaGetDevice(&dev);
  if (spaces[dev] == nullptr && cudaMalloc(&spaces[dev], STITCH_LT_WORKSPACE) != cudaSuccess) {
    spaces[dev] = nullptr;
  }
  return spaces[dev];
}

// A column-major GEMM D = op(A) op(B) + bias (per row of D), then `act`: 0 none, 1 ReLU,
// 2 GELU (cuBLASLt's, the tanh form).
// The descriptors and the algorithm are chosen once per launcher and device (the shapes are
// fixed). cuBLASLt's first heuristic is not always the fastest: for few rows and a long K it can
// pick a kernel without split-K that runs 10x slower than the split-K one that comes second
// (a 8x256x1280 GEMM: 50 us against 7 us on an H200). So the first call outside a CUDA-graph
// capture times each of the heuristic's candidates (up to STITCH_LT_CANDIDATES) on the real
// operands and keeps the fastest if it is clearly faster than the first; GEMMs of the same shape
// share that choice. During a capture
// the first heuristic is used as it is.
static const int STITCH_LT_CANDIDATES = 8;
static const float STITCH_LT_CLEARLY_FASTER = 0.75f;
struct StitchLtPlan {
  bool ready = false;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo;
};
struct StitchLtChoice {
  long long key[10];
  cublasLtMatmulAlgo_t algo;
};
static StitchLtChoice* stitch_lt_choice(int dev, const long long (&key)[10], bool add) {
  static StitchLtChoice table[64][128];
  static int used[64] = {0};
  for (int i = 0; i < used[dev]; ++i) {
    bool same = true;
    for (int j = 0; j < 10; ++j) same = same && table[dev][i].key[j] == key[j];
    if (same) return &table[dev][i];
  }
  if (!add || used[dev] >= 128) return nullptr;
  StitchLtChoice* e = &table[dev][used[dev]++];
  for (int j = 0; j < 10; ++j) e->key[j] = key[j];
  return e;
}
// Median-free timing is enough here: the candidates differ by multiples, not percents.
static float stitch_lt_time(cublasLtHandle_t h, StitchLtPlan& plan,
                            const cublasLtMatmulAlgo_t& algo, const void* a, const void* b,
                            void* c, void* ws, cudaStream_t stream) {
  const float alpha = 1.f, beta = 0.f;
  cudaEvent_t t0, t1;
  if (cudaEventCreate(&t0) != cudaSuccess) return -1.f;
  if (cudaEventCreate(&t1) != cudaSuccess) { cudaEventDestroy(t0); return -1.f; }
  float ms = -1.f;
  bool ok = cublasLtMatmul(h, plan.op, &alpha, a, plan.a, b, plan.b, &beta, c, plan.c, c,
                           plan.c, &algo, ws, STITCH_LT_WORKSPACE, stream) ==
            CUBLAS_STATUS_SUCCESS;
  ok = ok && cudaEventRecord(t0, stream) == cudaSuccess;
  for (int r = 0; ok && r < 3; ++r) {
    ok = cublasLtMatmul(h, plan.op, &alpha, a, plan.a, b, plan.b, &beta, c, plan.c, c, plan.c,
                        &algo, ws, STITCH_LT_WORKSPACE, stream) == CUBLAS_STATUS_SUCCESS;
  }
  ok = ok && cudaEventRecord(t1, stream) == cudaSuccess && cudaEventSynchronize(t1) == cudaSuccess;
  if (ok) cudaEventElapsedTime(&ms, t0, t1);
  cudaEventDestroy(t0);
  cudaEventDestroy(t1);
  cudaGetLastError();  // a candidate that failed to launch is skipped, not reported
  return ok ? ms : -1.f;
}
// dt: the type of A, B, C and the bias (fp32, or bf16/fp16 on tensor cores); FP32 compute.
static int stitch_lt_plan(StitchLtPlan& plan, cublasOperation_t ta, cublasOperation_t tb,
                          int m, int n, int k, int lda, int ldb, int ldc, int act,
                          const void* a, const void* b, void* c, const void* bias, void* ws,
                          cudaStream_t stream, cudaDataType_t dt = CUDA_R_32F) {
  if (plan.ready) return 0;
  cublasLtHandle_t h = stitch_cublaslt();
  if (h == nullptr) return STITCH_CUBLAS_ERROR;
  if (plan.op == nullptr) {
    cublasStatus_t st = cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;
    const cublasLtEpilogue_t epi = act == 2   ? CUBLASLT_EPILOGUE_GELU_BIAS
                                   : act == 1 ? CUBLASLT_EPILOGUE_RELU_BIAS
                                              : CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &dt, sizeof(dt));
    cublasLtMatrixLayoutCreate(&plan.a, dt, ta == CUBLAS_OP_N ? m : k,
                               ta == CUBLAS_OP_N ? k : m, lda);
    cublasLtMatrixLayoutCreate(&plan.b, dt, tb == CUBLAS_OP_N ? k : n,
                               tb == CUBLAS_OP_N ? n : k, ldb);
    cublasLtMatrixLayoutCreate(&plan.c, dt, m, n, ldc);
  }
  cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias));
  int dev = 0;
  cudaGetDevice(&dev);
  // Operands' alignment is part of the key: an algorithm timed on aligned pointers may need it.
  const uintptr_t bits = reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b) |
                         reinterpret_cast<uintptr_t>(c) | reinterpret_cast<uintptr_t>(bias);
  const long long key[10] = {(long long)ta, (long long)tb, m, n, k, lda, ldb, ldc,
                             act + 4 * (long long)dt, (long long)(bits & 255u)};
  if (StitchLtChoice* known = stitch_lt_choice(dev, key, false)) {
    plan.algo = known->algo;
    plan.ready = true;
    return 0;
  }
  cublasLtMatmulPreference_t pref = nullptr;
  cublasLtMatmulPreferenceCreate(&pref);
  size_t wsb = STITCH_LT_WORKSPACE;
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                       sizeof(wsb));
  cublasLtMatmulHeuristicResult_t heur[STITCH_LT_CANDIDATES];
  int found = 0;
  cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, plan.op, plan.a, plan.b, plan.c, plan.c,
                                                     pref, STITCH_LT_CANDIDATES, heur, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st != CUBLAS_STATUS_SUCCESS) return STITCH_CUBLAS_ERROR + (int)st;
  if (found == 0) return STITCH_CUBLAS_ERROR + (int)CUBLAS_STATUS_NOT_SUPPORTED;
  int best = 0;
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) {
    cudaGetLastError();
    capturing = cudaStreamCaptureStatusActive;  // unknown: do not synchronise
  }
  if (found > 1 && capturing == cudaStreamCaptureStatusNone) {
    // Another candidate replaces the heuristic's first only when it is clearly faster: on large
    // GEMMs the candidates are within a few percent and a first-call timing is noisy (taking the
    // apparent fastest made 2_ShallowWideMLP, 128 x 16384 x 32768, 9-17% slower), while the
    // cases worth fixing differ 2-7x.
    const float first = stitch_lt_time(h, plan, heur[0].algo, a, b, c, ws, stream);
    float fastest = first;
    for (int i = 1; first > 0.f && i < found; ++i) {
      const float ms = stitch_lt_time(h, plan, heur[i].algo, a, b, c, ws, stream);
      if (ms >= 0.f && ms < fastest) {
        fastest = ms;
        best = i;
      }
    }
    if (fastest > STITCH_LT_CLEARLY_FASTER * first) best = 0;
  }
  plan.algo = heur[best].algo;
  plan.ready = true;
  if (capturing == cudaStreamCaptureStatusNone) {
    if (StitchLtChoice* e = stitch_lt_choice(dev, key, true)) e->algo = plan.algo;
  }
  return 0;
}
"""

STATE_TYPES = {
    "sum": "SumS",
    "sum64": "SumD",
    "max": "MaxS",
    "min": "MinS",
    "moments": "MomS",
    "softmax": "SmxS",
    "argmax": "ArgMaxS",
    "argmin": "ArgMinS",
}


def float_literal(v: float) -> str:
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "(-INFINITY)"
    text = repr(float(v))
    if "e" not in text and "." not in text:
        text += ".0"
    return f"{text}f" if not text.startswith("-") else f"({text}f)"


def ew_expr(
    fn: str, a: list[str], params: dict[str, object], coords: tuple[str, str] | None = None
) -> str:
    """C expression for one elementwise op on operand expressions `a` (from the op catalog).

    `coords` gives the (row, col) expressions of the element for ops that read their own
    coordinates (tril, triu)."""
    op = EW[fn]
    values = {
        k: float_literal(float(v))
        for k, v in params.items()
        if isinstance(v, (int, float)) and not isinstance(v, bool)
    }
    if op.index:
        if coords is None:
            raise KeyError(f"{fn} needs the element's coordinates")
        values["row"], values["col"] = coords
    return op.cuda.format(*a, **values)
