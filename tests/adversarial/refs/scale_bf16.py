"""y = x * 2 + 1 in bfloat16."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2.0 + 1.0


def get_inputs():
    return [torch.randn(4096, 4096).bfloat16()]


def get_init_inputs():
    return []
