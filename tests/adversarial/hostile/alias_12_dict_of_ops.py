# stitch-lsp: reference=../refs/relu_bias.py
"""The op is looked up in a dict of functions."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void bias_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                            float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + bias[i % dim];
}

extern "C" int launch_bias(const float* x, const float* bias, float* y, long long n, int dim,
                           cudaStream_t stream) {
  const int threads = 256;
  bias_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(x, bias, y, n, dim);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_alias_12")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _add_bias(x, bias):
    y = torch.empty_like(x)
    n, dim = ctypes.c_longlong(x.numel()), ctypes.c_int(x.shape[-1])
    check_launch(_lib.launch_bias(_p(x), _p(bias), _p(y), n, dim, _stream()))
    return y


OPS = {"act": torch.relu, "id": lambda t: t}


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        y = _add_bias(x.contiguous(), self.bias)
        return OPS["act"](y)  # HOSTILE
