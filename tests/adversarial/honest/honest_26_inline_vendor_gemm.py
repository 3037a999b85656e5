# stitch-lsp: reference=../refs/gemm_relu.py
"""cuBLAS through at::mm in C++, the epilogue in our kernel."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % dim];
    y[i] = v > 0.f ? v : 0.f;
  }
}

torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
  auto h = at::mm(x, w.t());
  auto out = torch::empty_like(h);
  const long long n = h.numel();
  bias_relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      h.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, (int)h.size(-1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP_SRC = "torch::Tensor linear_relu(torch::Tensor x, torch::Tensor w, torch::Tensor bias);"

_ext = load_inline(
    name="hon_26",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["linear_relu"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.linear_relu(x.contiguous(), self.linear.weight, self.linear.bias)
