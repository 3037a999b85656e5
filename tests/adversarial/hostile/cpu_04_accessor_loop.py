# stitch-lsp: reference=../refs/relu_bias.py
"""The wrapper computes on the host and copies back."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void unused_bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % dim];
    y[i] = v > 0.f ? v : 0.f;
  }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
  auto hx = x.cpu();  // HOSTILE
  auto hb = bias.cpu();
  auto a = hx.accessor<float, 2>();
  auto b = hb.accessor<float, 1>();
  for (int64_t r = 0; r < hx.size(0); ++r)
    for (int64_t c = 0; c < hx.size(1); ++c) a[r][c] = std::max(a[r][c] + b[c], 0.f);
  return hx.to(x.device());
}
"""

CPP_SRC = "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="adv_cpu_04",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["bias_relu"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _ext.bias_relu(x.contiguous(), self.bias)
