import torch
import torch.nn as nn


class ModelNew(nn.Module):
    """Asks for 16 TiB of device memory on every call."""

    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scratch = torch.empty(1 << 44, dtype=torch.uint8, device=x.device)
        return scratch[: x.numel() * 4].view(torch.float32).view_as(x)
