import torch
import torch.nn as nn


class Model(nn.Module):
    """y = 1e-6 * relu(x + bias): small outputs, far below atol: zeros would pass."""

    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x + self.bias) * 1e-6


batch_size = 4096
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return [dim]
