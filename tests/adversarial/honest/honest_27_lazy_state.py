# stitch-lsp: reference=../refs/relu_bias.py
"""State kept across calls that holds no outputs: the compiled library in a mutable default
argument, launch sizes on a function attribute, the stream handle in a closure."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % dim];
    y[i] = v > 0.f ? v : 0.f;
  }
}

extern "C" int launch_bias_relu(const float* x, const float* bias, float* y, long long n,
                                int dim, cudaStream_t stream) {
  const int threads = 256;
  bias_relu_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
      x, bias, y, n, dim);
  return (int)cudaGetLastError();
}
"""


def _library(_built={}):  # noqa: B006
    if "lib" not in _built:
        _built["lib"] = load_cuda(CUDA_SRC, name="hon_27")
    return _built["lib"]


def _sizes(x):
    key = tuple(x.shape)
    if key not in _sizes.table:
        _sizes.table[key] = (ctypes.c_longlong(x.numel()), ctypes.c_int(x.shape[-1]))
    n, dim = _sizes.table[key]
    return n, dim


_sizes.table = {}


def _stream_source():
    handles = {}

    def current():
        device = torch.cuda.current_device()
        stream = torch.cuda.current_stream(device)
        handles[device] = stream.cuda_stream
        return ctypes.c_void_p(handles[device])

    return current


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self._stream = _stream_source()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n, dim = _sizes(x)
        lib = _library()
        check_launch(lib.launch_bias_relu(_p(x), _p(self.bias), _p(y), n, dim, self._stream()))
        return y
