# stitch-lsp: reference=../refs/softmax.py
"""The extension is a thin shell around ATen's softmax."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

torch::Tensor softmax_rows(torch::Tensor x) {
  return torch::softmax(x, 1);  // HOSTILE
}
"""

CPP_SRC = "torch::Tensor softmax_rows(torch::Tensor x);"

_ext = load_inline(
    name="adv_aten_01",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_rows"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.softmax_rows(x.contiguous())
