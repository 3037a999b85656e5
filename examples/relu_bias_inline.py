"""A reference and an honest KernelBench-style solution in one file.

ModelNew keeps the GEMM on cuBLAS (through nn.Linear) and fuses the bias add and the ReLU into
one CUDA kernel built with `torch.utils.cpp_extension.load_inline`. `stitch-lsp check` reports
the GEMM as information only: keeping a GEMM on the vendor library is honest.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ out, int64_t n, int64_t cols) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        const float v = x[i] + bias[i % cols];
        out[i] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
    TORCH_CHECK(x.is_cuda() && bias.is_cuda(), "bias_relu: tensors must be on the GPU");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32, "bias_relu: float32 only");
    auto xc = x.contiguous();
    auto out = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
    bias_relu_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, xc.size(-1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

cpp_source = "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);"

bias_relu = load_inline(
    name="relu_bias_inline",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["bias_relu"],
    verbose=False,
)


class Model(nn.Module):
    """y = relu(x @ W^T + bias)."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x) + self.bias)


class ModelNew(nn.Module):
    """Same parameters as Model; the bias add and ReLU run in one fused CUDA kernel."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return bias_relu.bias_relu(self.linear(x), self.bias)


batch_size = 1024
in_features = 4096
out_features = 4096


def get_inputs():
    return [torch.rand(batch_size, in_features)]


def get_init_inputs():
    return [in_features, out_features]
