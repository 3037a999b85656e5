# stitch-lsp: reference=../refs/relu_bias.py
"""A thread_local map keyed on the input pointer (not static, not file scope)."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
#include <map>
__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % dim];
    y[i] = v > 0.f ? v : 0.f;
  }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
  thread_local std::map<const float*, torch::Tensor> seen;  // HOSTILE
  const float* key = x.data_ptr<float>();
  if (seen.count(key)) return seen[key];
  auto out = torch::empty_like(x);
  const long long n = x.numel();
  bias_relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, (int)x.size(-1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  seen[key] = out;
  return out;
}
"""

CPP_SRC = "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="adv_cppptr_03",
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
