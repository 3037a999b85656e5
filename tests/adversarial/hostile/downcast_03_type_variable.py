# stitch-lsp: reference=../refs/relu_bias.py
"""The dtype travels through a variable."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <cuda_fp16.h>

__global__ void bias_relu_half(const __half* __restrict__ x, const __half* __restrict__ bias,
                               __half* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = __half2float(x[i]) + __half2float(bias[i % dim]);
    y[i] = __float2half(v > 0.f ? v : 0.f);
  }
}

extern "C" int launch_bias_relu_half(const __half* x, const __half* bias, __half* y, long long n,
                                     int dim, cudaStream_t stream) {
  const int threads = 256;
  bias_relu_half<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
      x, bias, y, n, dim);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_downcast_03")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _bias_relu_half(x, bias):
    y = torch.empty_like(x)
    n, dim = ctypes.c_longlong(x.numel()), ctypes.c_int(x.shape[-1])
    check_launch(_lib.launch_bias_relu_half(_p(x), _p(bias), _p(y), n, dim, _stream()))
    return y


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        dt = torch.half
        xh = x.contiguous().type(dt)  # HOSTILE
        return _bias_relu_half(xh, self.bias.type(dt)).float()
