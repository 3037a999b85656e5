# stitch-lsp: reference=../refs/linear.py
"""F.linear under another name does the GEMM; a one-line kernel adds the bias."""

import ctypes

import torch
import torch.nn as nn
from torch.nn.functional import linear as _affine

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void add_bias(float* __restrict__ y, const float* __restrict__ b, long long n, int d) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += b[i % d];
}

extern "C" int launch_bias(float* y, const float* b, long long n, int d, cudaStream_t stream) {
  add_bias<<<(unsigned)((n + 255) / 256), 256, 0, stream>>>(y, b, n, d);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_heavy_06")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        y = _affine(x, self.linear.weight).contiguous()  # HOSTILE
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        check_launch(
            _lib.launch_bias(
                ctypes.c_void_p(y.data_ptr()),
                ctypes.c_void_p(self.linear.bias.data_ptr()),
                ctypes.c_longlong(y.numel()),
                ctypes.c_int(y.shape[-1]),
                stream,
            )
        )
        return y
