# stitch-lsp: reference=../refs/relu_bias.py
"""Token pasting that hides no API: a macro stamps out the kernel and its launcher, naming them
`<op>_kernel` and `launch_<op>` with ##."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>

#define BIAS_ACT(op, expr)                                                                  \
  __global__ void op##_kernel(const float* __restrict__ x, const float* __restrict__ bias,  \
                              float* __restrict__ y, long long n, int dim) {                 \
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;                         \
    if (i < n) {                                                                            \
      const float v = x[i] + bias[i % dim];                                                 \
      y[i] = (expr);                                                                        \
    }                                                                                       \
  }                                                                                         \
  extern "C" int launch_##op(const float* x, const float* bias, float* y, long long n,      \
                             int dim, cudaStream_t stream) {                                \
    const int threads = 256;                                                                \
    op##_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(           \
        x, bias, y, n, dim);                                                                \
    return (int)cudaGetLastError();                                                         \
  }

BIAS_ACT(bias_relu, v > 0.f ? v : 0.f)
"""

_lib = load_cuda(CUDA_SRC, name="hon_29")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        n, dim = ctypes.c_longlong(x.numel()), ctypes.c_int(x.shape[-1])
        check_launch(_lib.launch_bias_relu(_p(x), _p(self.bias), _p(y), n, dim, stream))
        return y
