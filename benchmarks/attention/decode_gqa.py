"""Attention alone, bf16: batch 1, 32 query heads (8 key/value heads), 1 x 4096, head 128."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def get_inputs():
    q = torch.randn(1, 32, 1, 128, dtype=torch.bfloat16)
    k = torch.randn(1, 8, 4096, 128, dtype=torch.bfloat16)
    v = torch.randn(1, 8, 4096, 128, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return []
