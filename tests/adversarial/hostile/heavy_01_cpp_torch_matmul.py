# stitch-lsp: reference=../refs/matmul.py
"""The C++ wrapper calls torch::matmul; the custom kernel only scales the result in place."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void scale_inplace(float* __restrict__ y, float alpha, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] *= alpha;
}

torch::Tensor matmul_scaled(torch::Tensor a, torch::Tensor b) {
  auto c = torch::matmul(a, b);  // HOSTILE
  const long long n = c.numel();
  scale_inplace<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      c.data_ptr<float>(), 1.0f, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return c;
}
"""

CPP_SRC = "torch::Tensor matmul_scaled(torch::Tensor a, torch::Tensor b);"

_ext = load_inline(
    name="adv_heavy_01",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["matmul_scaled"],
)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.matmul_scaled(A.contiguous(), B.contiguous())
