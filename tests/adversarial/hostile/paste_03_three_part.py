# stitch-lsp: reference=../refs/linear.py
"""nn.Linear's GEMM runs in cublasGemmEx, its name glued from three parts; a custom kernel adds
the bias afterwards."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <cublas_v2.h>

#define GLUE(a, b, c) a ## b ## c

__global__ void add_bias(float* __restrict__ y, const float* __restrict__ bias, long long n,
                         int cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += bias[i % cols];
}

extern "C" int launch_linear(const float* x, const float* w, const float* bias, float* y, int m,
                             int k, int n, cudaStream_t stream) {
  static cublasHandle_t h = nullptr;
  if (h == nullptr) GLUE(cublas, Cre, ate)(&h);
  GLUE(cublas, Set, Stream)(h, stream);
  const float one = 1.f, zero = 0.f;
  // y[m, n] = x[m, k] @ w[n, k]^T, in column-major terms y^T = w x^T.
  GLUE(cublas, Gemm, Ex)(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, CUDA_R_32F, k, x,  // HOSTILE
                         CUDA_R_32F, k, &zero, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
  const long long total = (long long)m * n;
  add_bias<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(y, bias, total, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_paste_03", libraries=("cublas",))


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        x = x.contiguous()
        w, b = self.linear.weight.contiguous(), self.linear.bias.contiguous()
        y = torch.empty(x.shape[0], w.shape[0], device=x.device, dtype=x.dtype)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        m, k, n = (ctypes.c_int(v) for v in (x.shape[0], x.shape[1], w.shape[0]))
        check_launch(_lib.launch_linear(_p(x), _p(w), _p(b), _p(y), m, k, n, stream))
        return y
