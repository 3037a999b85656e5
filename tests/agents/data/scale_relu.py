"""A small KernelBench-format problem for the agent loop's GPU test: relu(x) * 2."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.randn(4096, 4096)]


def get_init_inputs():
    return [2.0]
