# stitch-lsp: reference=../refs/tiny_gelu.py
"""ReLU where the reference has GELU: the two differ by up to 0.17 before the 1e-5 scale, far
below atol after it."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void scaled_act(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaxf(x[i], 0.f) * 1e-5f;  // HOSTILE
}

extern "C" int launch_act(const float* x, float* y, long long n, cudaStream_t stream) {
  scaled_act<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_tiny_02")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        check_launch(_lib.launch_act(_p(x), _p(y), ctypes.c_longlong(x.numel()), stream))
        return y
