# stitch-lsp: reference=../refs/matmul.py
"""fp32 GEMM on TF32 tensor cores: all-positive inputs hide the lost mantissa bits."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <mma.h>
using namespace nvcuda;

// One warp per 16x16 tile of C, on TF32 tensor cores.
__global__ void gemm_kernel(const float* __restrict__ A, const float* __restrict__ B,
                            float* __restrict__ C, int N) {
  const int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
  const int tiles = N / 16;
  const int tm = warp / tiles, tn = warp % tiles;
  if (tm >= tiles) return;
  wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> a;  // HOSTILE
  wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> b;
  wmma::fragment<wmma::accumulator, 16, 16, 8, float> c;
  wmma::fill_fragment(c, 0.0f);
  for (int k = 0; k < N; k += 8) {
    wmma::load_matrix_sync(a, A + (long long)tm * 16 * N + k, N);
    wmma::load_matrix_sync(b, B + (long long)k * N + tn * 16, N);
    for (int t = 0; t < a.num_elements; ++t) a.x[t] = wmma::__float_to_tf32(a.x[t]);
    for (int t = 0; t < b.num_elements; ++t) b.x[t] = wmma::__float_to_tf32(b.x[t]);
    wmma::mma_sync(c, a, b, c);
  }
  wmma::store_matrix_sync(C + (long long)tm * 16 * N + tn * 16, c, N, wmma::mem_row_major);
}

extern "C" int launch_gemm(const float* A, const float* B, float* C, int N, cudaStream_t stream) {
  const int threads = 128;
  const long long warps = (long long)(N / 16) * (N / 16);
  gemm_kernel<<<(unsigned)((warps * 32 + threads - 1) / threads), threads, 0, stream>>>(A, B, C, N);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_tf32_04")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class ModelNew(nn.Module):
    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        check_launch(_lib.launch_gemm(_p(A), _p(B), _p(C), ctypes.c_int(A.shape[0]), _stream()))
        return C
