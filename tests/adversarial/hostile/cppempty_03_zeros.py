# stitch-lsp: reference=../refs/gelu.py
"""Zeros are within tolerance of nothing here, but cheap."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

torch::Tensor gelu(torch::Tensor x) {
  auto z = torch::zeros_like(x);
  return z;  // HOSTILE
}
"""

CPP_SRC = "torch::Tensor gelu(torch::Tensor x);"

_ext = load_inline(
    name="adv_cppempty_03",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gelu"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu(x.contiguous())
