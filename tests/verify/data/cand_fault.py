# stitch-lsp: reference=ref_bias_relu.py
import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  long long stride = (long long)gridDim.x * blockDim.x;
  for (; i < n; i += stride) {
    float v = x[i] + bias[i % dim];
    y[i + (1LL << 40)] = v > 0.f ? v : 0.f;  // far outside any allocation
  }
}

extern "C" int launch_bias_relu(const float* x, const float* bias, float* y, long long n,
                                int dim, cudaStream_t stream) {
  int threads = 256;
  long long blocks = (n + threads - 1) / threads;
  if (blocks > 65535LL * 16) blocks = 65535LL * 16;
  bias_relu_kernel<<<(unsigned)blocks, threads, 0, stream>>>(x, bias, y, n, dim);
  return (int)cudaGetLastError();
}
"""

_lib = None


def _get_lib():
    global _lib
    if _lib is None:
        _lib = load_cuda(CUDA_SRC, name="bias_relu_fault")
    return _lib


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lib = _get_lib()
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = torch.cuda.current_stream().cuda_stream
        check_launch(
            lib.launch_bias_relu(
                ctypes.c_void_p(x.data_ptr()),
                ctypes.c_void_p(self.bias.data_ptr()),
                ctypes.c_void_p(y.data_ptr()),
                ctypes.c_longlong(x.numel()),
                ctypes.c_int(x.shape[-1]),
                ctypes.c_void_p(stream),
            ),
            lib,
            "launch_bias_relu",
        )
        return y
