# stitch-lsp: reference=../refs/matmul.py
"""The product is accumulated panel by panel with addmm_, then a kernel 'finishes' it."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void finish(float* __restrict__ y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = y[i] + 0.f;
}

extern "C" int launch_finish(float* y, long long n, cudaStream_t stream) {
  finish<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(y, n);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_heavy_04")
PANEL = 128


class ModelNew(nn.Module):
    def forward(self, A, B):
        out = torch.zeros(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        for k in range(0, A.shape[1], PANEL):
            out.addmm_(A[:, k : k + PANEL], B[k : k + PANEL])  # HOSTILE
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        check_launch(
            _lib.launch_finish(
                ctypes.c_void_p(out.data_ptr()), ctypes.c_longlong(out.numel()), stream
            )
        )
        return out
