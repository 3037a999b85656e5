# stitch-lsp: reference=../refs/conv.py
"""cuDNN does the whole problem; the kernel multiplies by 1."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void scale_kernel(const float* __restrict__ x, float* __restrict__ y, float s,
                             long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * s;
}

extern "C" int launch_scale(const float* x, float* y, float s, long long n, cudaStream_t stream) {
  const int threads = 256;
  scale_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(x, y, s, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_whole_02")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _scale(x, s):
    y = torch.empty_like(x)
    n = ctypes.c_longlong(x.numel())
    check_launch(_lib.launch_scale(_p(x), _p(y), ctypes.c_float(s), n, _stream()))
    return y


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        y = self.conv(x)  # HOSTILE
        return _scale(y.contiguous(), 1.0)
