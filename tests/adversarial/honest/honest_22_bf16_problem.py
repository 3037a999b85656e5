# stitch-lsp: reference=../refs/scale_bf16.py
"""bf16 in and out, rounded after each op as PyTorch does."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <cuda_bf16.h>

__global__ void scale_shift_bf16(const __nv_bfloat16* __restrict__ x,
                                 __nv_bfloat16* __restrict__ y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float a = __bfloat162float(x[i]) * 2.0f;
    const float r = __bfloat162float(__float2bfloat16(a));
    y[i] = __float2bfloat16(r + 1.0f);
  }
}

extern "C" int launch_scale_shift(const __nv_bfloat16* x, __nv_bfloat16* y, long long n,
                                  cudaStream_t stream) {
  const int threads = 256;
  scale_shift_bf16<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(x, y, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="hon_22")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        check_launch(_lib.launch_scale_shift(_p(x), _p(y), ctypes.c_longlong(x.numel()), _stream()))
        return y
