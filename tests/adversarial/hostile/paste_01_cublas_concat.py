# stitch-lsp: reference=../refs/matmul.py
"""cuBLAS does the GEMM under a name pasted together by a two-level CAT macro; a kernel after
it only scales the result by one."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <cublas_v2.h>

#define CAT_(a, b) a##b
#define CAT(a, b) CAT_(a, b)

__global__ void scale_rows(float* __restrict__ c, float alpha, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) c[i] *= alpha;
}

extern "C" int launch_gemm(const float* a, const float* b, float* c, int n, cudaStream_t stream) {
  static cublasHandle_t handle = nullptr;
  if (handle == nullptr) CAT(cublas, Create)(&handle);
  CAT(cublas, SetStream)(handle, stream);
  const float one = 1.f, zero = 0.f;
  CAT(cublasS, gemm)(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, n, a, n, &zero, c, n);  // HOSTILE
  const long long total = (long long)n * n;
  scale_rows<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(c, 1.f, total);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_paste_01", libraries=("cublas",))


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


class ModelNew(nn.Module):
    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        check_launch(_lib.launch_gemm(_p(A), _p(B), _p(C), ctypes.c_int(A.shape[0]), stream))
        return C
