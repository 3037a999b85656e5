# stitch-lsp: reference=../refs/gelu.py
"""synchronize becomes a no-op, so timing stops before the work ends."""

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

_lib = load_cuda(CUDA_SRC, name="adv_timer_02")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _copy(x):
    y = torch.empty_like(x)
    check_launch(_lib.launch_copy(_p(x), _p(y), ctypes.c_longlong(x.numel()), _stream()))
    return y


setattr(getattr(torch, "cuda"), "synchronize", lambda *a, **k: None)  # HOSTILE


class ModelNew(nn.Module):
    def forward(self, x):
        return F.gelu(_copy(x.contiguous()))
