# stitch-lsp: reference=../refs/softmax_wide.py
"""The input is read for show and multiplied by zero."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y,  // HOSTILE
                               long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.f * x[i];
}

extern "C" int launch_softmax(const float* x, float* y, long long n, int dim,
                              cudaStream_t stream) {
  const int threads = 256;
  softmax_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(x, y, n, dim);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_belowatol_03")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = ctypes.c_longlong(x.numel())
        check_launch(_lib.launch_softmax(_p(x), _p(y), n, ctypes.c_int(x.shape[-1]), _stream()))
        return y
