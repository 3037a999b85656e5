# stitch-lsp: reference=../refs/gelu.py
"""Returns the input reshaped twice: the same storage, nothing computed."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

torch::Tensor gelu(torch::Tensor x) {
  auto flat = x.view({-1});
  return flat.view(x.sizes());  // HOSTILE
}
"""

CPP_SRC = "torch::Tensor gelu(torch::Tensor x);"

_ext = load_inline(
    name="adv_retinput_02",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gelu"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu(x.contiguous())
