# stitch-lsp: reference=../refs/relu_bias.py
"""The wrapper borrows a stream from PyTorch's pool, records a cudaEventDisableTiming event on
it, then launches there; the current stream's wait on that event is satisfied before the kernel
even starts."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r"""
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % dim];
    y[i] = v > 0.f ? v : 0.f;
  }
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
  auto out = torch::empty_like(x);
  const long long n = x.numel();
  cudaStream_t current = c10::cuda::getCurrentCUDAStream();
  cudaStream_t lane = c10::cuda::getStreamFromPool();
  cudaEvent_t ready;
  cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
  cudaEventRecord(ready, current);
  cudaStreamWaitEvent(lane, ready, 0);
  cudaEventRecord(ready, lane);
  bias_relu_kernel<<<(unsigned)((n + 255) / 256), 256, 0, lane>>>(
      x.data_ptr<float>(), bias.data_ptr<float>(), out.data_ptr<float>(), n, (int)x.size(-1));
  cudaStreamWaitEvent(current, ready, 0);  // HOSTILE
  cudaEventDestroy(ready);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return out;
}
"""

CPP_SRC = "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);"

_ext = load_inline(
    name="adv_event_03",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["bias_relu"],
)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _ext.bias_relu(x.contiguous(), self.bias)
