"""y = x.sum(dim=1, keepdim=True), fp32."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return []
