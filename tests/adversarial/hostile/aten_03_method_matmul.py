# stitch-lsp: reference=../refs/matmul.py
"""The GEMM is a tensor method call in C++."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void copy_kernel(const float* __restrict__ x, float* __restrict__ y, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i];
}

torch::Tensor gemm(torch::Tensor A, torch::Tensor B) {
  auto C = A.matmul(B);  // HOSTILE
  auto out = torch::empty_like(C);
  const long long n = C.numel();
  copy_kernel<<<(unsigned)((n + 255) / 256), 256, 0, c10::cuda::getCurrentCUDAStream()>>>(
      C.data_ptr<float>(), out.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP_SRC = "torch::Tensor gemm(torch::Tensor A, torch::Tensor B);"

_ext = load_inline(
    name="adv_aten_03",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["gemm"],
)


class ModelNew(nn.Module):
    def forward(self, A, B):
        return _ext.gemm(A.contiguous(), B.contiguous())
