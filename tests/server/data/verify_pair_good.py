import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda


class Model(nn.Module):
    """y = relu(x + bias): bias is a parameter, so both models must be seeded alike."""

    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bias)


batch_size = 1024
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]


CUDA_SRC = r"""
#include <cuda_runtime.h>

// One block row per tensor row: the column index is the bias index (no 64-bit modulo).
__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, int rows, int dim) {
  int col = blockIdx.x * blockDim.x + threadIdx.x;
  int row = blockIdx.y;
  if (col >= dim || row >= rows) return;
  long long i = (long long)row * dim + col;
  float v = x[i] + bias[col];
  y[i] = v > 0.f ? v : 0.f;
}

extern "C" int launch_bias_relu(const float* x, const float* bias, float* y, int rows, int dim,
                                cudaStream_t stream) {
  dim3 block(256);
  dim3 grid((dim + block.x - 1) / block.x, rows);
  bias_relu_kernel<<<grid, block, 0, stream>>>(x, bias, y, rows, dim);
  return (int)cudaGetLastError();
}
"""

_lib = None


def _get_lib():
    global _lib
    if _lib is None:
        _lib = load_cuda(CUDA_SRC, name="bias_relu_pair")
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
                ctypes.c_int(x.numel() // x.shape[-1]),
                ctypes.c_int(x.shape[-1]),
                ctypes.c_void_p(stream),
            ),
            lib,
            "launch_bias_relu",
        )
        return y
