"""A small level-3-like problem for builtin seeding: three convolutions with tails. The builtin
generator handles conv+relu and conv+sigmoid but not a running log-sum-exp (logcumsumexp), so it
cannot do the whole model, yet it can seed two of its three subtasks."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.conv1 = nn.Conv2d(3, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv3 = nn.Conv2d(channels, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.conv1(x))
        x = torch.logcumsumexp(self.conv2(x), dim=3)
        return torch.sigmoid(self.conv3(x))


def get_inputs():
    return [torch.randn(8, 3, 32, 32)]


def get_init_inputs():
    return [16]
