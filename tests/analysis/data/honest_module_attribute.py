"""Honest: the extension is stored on the module in __init__ and called through that attribute,
whose function happens to be named like a PyTorch operator."""

import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_relu_source = """
#include <torch/extension.h>
#include <cuda_runtime.h>

__global__ void add_relu_kernel(const float* a, const float* b, float* out, int size) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < size) {
        float v = a[idx] + b[idx];
        out[idx] = v > 0.0f ? v : 0.0f;
    }
}

torch::Tensor relu(torch::Tensor a, torch::Tensor b) {
    auto size = a.numel();
    auto out = torch::zeros_like(a);
    const int block_size = 256;
    const int num_blocks = (size + block_size - 1) / block_size;
    add_relu_kernel<<<num_blocks, block_size>>>(
        a.data_ptr<float>(), b.data_ptr<float>(), out.data_ptr<float>(), size);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return out;
}
"""

add_relu_cpp_source = "torch::Tensor relu(torch::Tensor a, torch::Tensor b);"

add_relu = load_inline(
    name="add_relu",
    cpp_sources=add_relu_cpp_source,
    cuda_sources=add_relu_source,
    functions=["relu"],
    verbose=True,
    extra_cflags=[""],
    extra_ldflags=[""],
)


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.add_relu = add_relu

    def forward(self, a, b):
        return self.add_relu.relu(a, b)
