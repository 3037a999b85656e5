# stitch-lsp: reference=../refs/gelu.py
"""The op is stored on the module in __init__ and called in forward."""

import ctypes

import torch
import torch.nn as nn
import torch.nn.functional as F

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

extern "C" int launch_copy(const float* x, float* y, long long n, cudaStream_t stream) {
  const int threads = 256;
  copy_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_alias_13")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _copy(x):
    y = torch.empty_like(x)
    check_launch(_lib.launch_copy(_p(x), _p(y), ctypes.c_longlong(x.numel()), _stream()))
    return y


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = F.gelu

    def forward(self, x):
        return self.act(_copy(x.contiguous()))  # HOSTILE
