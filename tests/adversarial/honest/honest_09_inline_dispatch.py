# stitch-lsp: reference=../refs/relu_bias.py
"""The launch sits inside AT_DISPATCH_FLOATING_TYPES' lambda."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

template <typename scalar_t>
__global__ void bias_relu_t(const scalar_t* __restrict__ x, const scalar_t* __restrict__ bias,
                            scalar_t* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const scalar_t v = x[i] + bias[i % dim];
    y[i] = v > scalar_t(0) ? v : scalar_t(0);
  }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
  auto out = at::empty_like(x);
  const long long n = x.numel();
  const int dim = (int)x.size(-1);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "bias_relu", [&] {
    bias_relu_t<scalar_t><<<(unsigned)((n + 255) / 256), 256, 0,
                            c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<scalar_t>(), bias.data_ptr<scalar_t>(), out.data_ptr<scalar_t>(), n, dim);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP_SRC = "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="hon_09",
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
