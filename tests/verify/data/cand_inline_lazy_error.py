# KernelBench format, with load_inline called from __init__ (after the import).
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
__global__ void bias_relu_kernel(const float* x, const float* bias, float* y, long long n,
                                 int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    float v = x[i] + bias[i % dim] + missing_offset;
    y[i] = v > 0.f ? v : 0.f;
  }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
  auto y = torch::empty_like(x);
  long long n = x.numel();
  int threads = 256;
  bias_relu_kernel<<<(unsigned)((n + threads - 1) / threads), threads>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), y.data_ptr<float>(), n, (int)x.size(-1));
  return y;
}
"""

cpp_source = "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);"


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))
        self.fused = load_inline(
            name="stitch_test_bias_relu_inline_lazy_err",
            cpp_sources=cpp_source,
            cuda_sources=cuda_source,
            functions=["bias_relu"],
            verbose=False,
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fused.bias_relu(x.contiguous(), self.bias)
