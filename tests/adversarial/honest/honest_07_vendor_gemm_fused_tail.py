# stitch-lsp: reference=../refs/gemm_relu.py
"""The GEMM stays on cuBLAS through PyTorch; the tail is one custom kernel."""

import ctypes

import torch
import torch.nn as nn
import torch.nn.functional as F

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void bias_relu_rows(const float* __restrict__ h, const float* __restrict__ bias,
                               float* __restrict__ y, long long total, int cols) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < total) {
    const float v = h[i] + bias[i % cols];
    y[i] = v > 0.f ? v : 0.f;
  }
}

extern "C" int launch_epilogue(const float* h, const float* bias, float* y, long long total,
                               int cols, cudaStream_t stream) {
  const int threads = 256;
  bias_relu_rows<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(
      h, bias, y, total, cols);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="hon_07")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _epilogue(h, bias):
    y = torch.empty_like(h)
    n, cols = ctypes.c_longlong(h.numel()), ctypes.c_int(h.shape[-1])
    check_launch(_lib.launch_epilogue(_p(h), _p(bias), _p(y), n, cols, _stream()))
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        h = F.linear(x, self.linear.weight)
        return _epilogue(h.contiguous(), self.linear.bias)
