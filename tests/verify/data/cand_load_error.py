# KernelBench format with the CUDA in a separate file, built by torch's `load`.
from pathlib import Path

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

ext = load(
    name="stitch_test_load_error", sources=[str(Path(__file__).with_name("kernel_error.cu"))]
)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.forward(x, self.bias)
