"""A KernelBench-style problem: a GEMM, a bias add and a ReLU.

`stitch-lsp generate examples/gemm_add_relu.py` writes a candidate beside it; the three names
below (Model, get_inputs, get_init_inputs) are the KernelBench problem format.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    """y = relu(x @ W^T + bias)."""

    def __init__(self, in_features: int, out_features: int, bias_shape: tuple[int, ...]):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gemm(x)
        x = x + self.bias
        x = torch.relu(x)
        return x


batch_size = 1024
in_features = 8192
out_features = 8192
bias_shape = (out_features,)


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features, bias_shape]
