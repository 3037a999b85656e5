"""An honest load_inline solution: y = x * s in one CUDA kernel."""

import torch  # noqa: F401  (a realistic solution file)
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_src = r"""
#include <torch/extension.h>
__global__ void scale_kernel(const float* x, float* y, float s, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s;
}

torch::Tensor scale(torch::Tensor x, double s) {
    auto y = torch::empty_like(x);
    int n = x.numel();
    int blocks = (n + 255) / 256;
    scale_kernel<<<blocks, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)s, n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
"""

scale_ext = load_inline(
    name="scale_ext",
    cpp_sources="torch::Tensor scale(torch::Tensor x, double s);",
    cuda_sources=cuda_src,
    functions=["scale"],
)


class ModelNew(nn.Module):
    def __init__(self, s: float):
        super().__init__()
        self.s = s

    def forward(self, x):
        return scale_ext.scale(x, self.s)
