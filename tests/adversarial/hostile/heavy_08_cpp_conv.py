# stitch-lsp: reference=../refs/conv.py
"""at::conv2d without its bias in the wrapper; the kernel adds the bias afterwards."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void add_channel_bias(float* __restrict__ y, const float* __restrict__ b, long long n,
                                 int hw, int c) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += b[(i / hw) % c];
}

torch::Tensor conv_bias(torch::Tensor x, torch::Tensor w, torch::Tensor b) {
  auto y = at::conv2d(x, w).contiguous();  // HOSTILE
  const long long n = y.numel();
  add_channel_bias<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      y.data_ptr<float>(), b.data_ptr<float>(), n, (int)(y.size(2) * y.size(3)), (int)y.size(1));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""

CPP_SRC = "torch::Tensor conv_bias(torch::Tensor x, torch::Tensor w, torch::Tensor b);"

_ext = load_inline(
    name="adv_heavy_08",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["conv_bias"],
)


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        return _ext.conv_bias(x.contiguous(), self.conv.weight, self.conv.bias)
