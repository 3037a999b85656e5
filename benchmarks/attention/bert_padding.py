"""Attention alone, bf16: batch 16, 12 query heads (12 key/value heads), 512 x 512, head 64."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor
    ) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def get_inputs():
    q = torch.randn(16, 12, 512, 64, dtype=torch.bfloat16)
    k = torch.randn(16, 12, 512, 64, dtype=torch.bfloat16)
    v = torch.randn(16, 12, 512, 64, dtype=torch.bfloat16)
    mask = torch.zeros(16, 1, 1, 512, dtype=torch.bfloat16)
    mask[:, :, :, 512 - 64 :] = torch.finfo(torch.bfloat16).min  # padding at the end
    return [q, k, v, mask]


def get_init_inputs():
    return []
