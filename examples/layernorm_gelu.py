"""A reference a new user can try at once: LayerNorm, then GELU, then a scale.

KernelBench format: `Model`, `get_inputs()` and `get_init_inputs()`. Eager PyTorch runs this as
three kernels; `stitch-lsp generate` fuses it into one pass over the activations.
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, hidden: int, scale: float):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        x = torch.nn.functional.gelu(x)
        return x * self.scale


batch_size = 4096
hidden = 4096
scale = 0.5


def get_inputs():
    return [torch.randn(batch_size, hidden)]


def get_init_inputs():
    return [hidden, scale]
