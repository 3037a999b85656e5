"""y = relu(x) * scale, fp32, with all-positive inputs (as many KernelBench problems draw them
with torch.rand): the ReLU never bites on these inputs."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x) * self.scale


def get_inputs():
    return [torch.rand(4096, 4096)]


def get_init_inputs():
    return [1.5]
