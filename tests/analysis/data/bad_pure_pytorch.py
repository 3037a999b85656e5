# Deliberately bad: a "solution" that is only PyTorch, with decorative CUDA and a fallback.
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
__global__ void gemm_kernel(const float* a, const float* b, float* c, int n) {}
torch::Tensor gemm(torch::Tensor a, torch::Tensor b) { return torch::matmul(a, b); }
"""

ext = load_inline(
    name="deco",
    cpp_sources="torch::Tensor gemm(torch::Tensor a, torch::Tensor b);",
    cuda_sources=cuda_src,
    functions=["gemm"],
)


class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)


class ModelNew(nn.Module):
    def forward(self, a, b):
        try:
            return torch.matmul(a, b)
        except RuntimeError:
            return Model()(a, b)
