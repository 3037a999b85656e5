"""y = softmax(x, dim=1) over very wide rows: every output is about 1/262144, far below the
1e-4 tolerance, so an all-zero output is within tolerance of the right answer."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(x, dim=1)


batch_size = 16
dim = 262144


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
