"""y = gelu(x) * 1e-5: every output is below the 1e-4 tolerance, so allclose alone cannot tell
gelu from relu or from anything else that small."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(x) * 1e-5


batch_size = 4096
dim = 4096


def get_inputs():
    return [torch.randn(batch_size, dim)]


def get_init_inputs():
    return []
