"""Attention alone, bf16: batch 8, 12 query heads (12 key/value heads), 1024 x 1024, head 64."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs():
    q = torch.randn(8, 12, 1024, 64, dtype=torch.bfloat16)
    k = torch.randn(8, 12, 1024, 64, dtype=torch.bfloat16)
    v = torch.randn(8, 12, 1024, 64, dtype=torch.bfloat16)
    return [q, k, v]


def get_init_inputs():
    return []
