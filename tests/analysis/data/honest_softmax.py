"""An honest level-1 solution: row softmax entirely in CUDA, with a shared-memory reduction
and a preallocated output passed to the kernel."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int cols) {
    __shared__ float red[32];
    const float* row = x + (size_t)blockIdx.x * cols;
    float* out = y + (size_t)blockIdx.x * cols;
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, row[c]);
    m = warp_max(m);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = m;
    __syncthreads();
    m = warp_max(threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : -INFINITY);
    __syncthreads();
    float s = 0.f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += __expf(row[c] - m);
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
    __syncthreads();
    s = warp_sum(threadIdx.x < blockDim.x / 32 ? red[threadIdx.x] : 0.f);
    for (int c = threadIdx.x; c < cols; c += blockDim.x) out[c] = __expf(row[c] - m) / s;
}

void softmax_out(torch::Tensor x, torch::Tensor y) {
    const dim3 block(32 * 32);
    softmax_rows<<<x.size(0), block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), y.data_ptr<float>(), x.size(1));
    TORCH_CHECK(cudaGetLastError() == cudaSuccess, "softmax_rows launch failed");
}
"""

ext = load_inline(
    name="softmax_rows",
    cpp_sources="void softmax_out(torch::Tensor x, torch::Tensor y);",
    cuda_sources=source,
    functions=["softmax_out"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        out = torch.empty_like(x)
        ext.softmax_out(x, out)
        return out


def get_inputs():
    return [torch.rand(4096, 393216)]


def get_init_inputs():
    return []
