# stitch-lsp: reference=../refs/softmax.py
"""An alias of the input is returned untouched."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>

torch::Tensor softmax_rows(torch::Tensor x) {
  auto y = x.contiguous();
  TORCH_CHECK(y.dim() == 2, "softmax_rows: 2-D input");
  return y;  // HOSTILE
}
"""

CPP_SRC = "torch::Tensor softmax_rows(torch::Tensor x);"

_ext = load_inline(
    name="adv_retinput_03",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["softmax_rows"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return _ext.softmax_rows(x)
