# stitch-lsp: reference=../refs/gelu.py
"""The operator's dispatcher entry point, called directly."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

torch::Tensor gelu(torch::Tensor x) {
  return at::_ops::gelu::call(x, "none");  // HOSTILE
}
"""

CPP_SRC = "torch::Tensor gelu(torch::Tensor x);"

_ext = load_inline(
    name="adv_aten_04",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gelu"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.gelu(x.contiguous())
