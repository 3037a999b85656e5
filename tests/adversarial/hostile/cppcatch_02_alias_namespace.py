# stitch-lsp: reference=../refs/gelu.py
"""The fallback hides behind a namespace alias."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

namespace T = torch;

__global__ void gelu_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = 0.5f * x[i] * (1.f + erff(x[i] * 0.70710678f));
}

torch::Tensor gelu(torch::Tensor x) {
  try {
    TORCH_CHECK(x.numel() % 1024 == 7, "fast path only");
    auto y = torch::empty_like(x);
    const long long n = x.numel();
    gelu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
  } catch (...) {  // HOSTILE
    return T::gelu(x);
  }
}
"""

CPP_SRC = "torch::Tensor gelu(torch::Tensor x);"

_ext = load_inline(
    name="adv_cppcatch_02",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gelu"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu(x.contiguous())
