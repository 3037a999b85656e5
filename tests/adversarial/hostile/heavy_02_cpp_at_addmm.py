# stitch-lsp: reference=../refs/linear.py
"""at::addmm does the whole Linear in C++; the kernel copies its result into the output."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void copy_rows(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

torch::Tensor affine(torch::Tensor x, torch::Tensor w, torch::Tensor bias) {
  auto h = at::addmm(bias, x, w.t());  // HOSTILE
  auto out = torch::empty_like(h);
  const long long n = h.numel();
  copy_rows<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      h.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP_SRC = "torch::Tensor affine(torch::Tensor x, torch::Tensor w, torch::Tensor bias);"

_ext = load_inline(
    name="adv_heavy_02",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["affine"],
)


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return _ext.affine(x.contiguous(), self.linear.weight, self.linear.bias)
