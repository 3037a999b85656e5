# stitch-lsp: reference=../refs/conv_relu.py
"""The convolution stays on cuDNN; the tail is ours."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void scale_relu(const float* __restrict__ x, float* __restrict__ y, float s,
                           long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i] * s, 0.f);
}

extern "C" int launch_scale_relu(const float* x, float* y, float s, long long n,
                                 cudaStream_t stream) {
  const int threads = 256;
  scale_relu<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(x, y, s, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="hon_17")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, scale):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale = scale

    def forward(self, x):
        h = self.conv(x).contiguous()
        y = torch.empty_like(h)
        s, n = ctypes.c_float(self.scale), ctypes.c_longlong(h.numel())
        check_launch(_lib.launch_scale_relu(_p(h), _p(y), s, n, _stream()))
        return y
