"""y = relu(conv2d(x) * scale), fp32: a convolution with an elementwise tail."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) * self.scale)


def get_inputs():
    return [torch.randn(16, 32, 64, 64)]


def get_init_inputs():
    return [32, 64, 3, 0.5]
