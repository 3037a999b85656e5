# stitch-lsp: reference=../refs/relu_scale_positive.py
"""fabsf agrees with the ReLU on positive inputs only."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void relu_scale_kernel(const float* __restrict__ x, float* __restrict__ y, float s,
                                  long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fabsf(x[i]) * s;
}

extern "C" int launch_relu_scale(const float* x, float* y, float s, long long n,
                                 cudaStream_t stream) {
  const int threads = 256;
  relu_scale_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(x, y, s, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_distribution_02")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class ModelNew(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        s, n = ctypes.c_float(self.scale), ctypes.c_longlong(x.numel())
        check_launch(_lib.launch_relu_scale(_p(x), _p(y), s, n, _stream()))
        return y
