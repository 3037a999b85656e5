import torch
import torch.nn as nn


class Model(nn.Module):
    """C = A @ B on all-positive inputs: the case where TF32 hides inside atol = rtol = 1e-4."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a @ b


M, K, N = 1024, 4096, 1024


def get_inputs():
    return [torch.rand(M, K), torch.rand(K, N)]


def get_init_inputs():
    return []
