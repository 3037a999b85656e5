# stitch-lsp: reference=../refs/relu_bias.py
"""Timing-free events used honestly: the launcher records one after its kernel on the stream it
was given and that stream waits on it; forward records another after the launch and the current
stream waits on that. Every event marks the end of the work it follows."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ bias,
                                 float* __restrict__ y, long long n, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i] + bias[i % dim];
    y[i] = v > 0.f ? v : 0.f;
  }
}

extern "C" int launch_bias_relu(const float* x, const float* bias, float* y, long long n,
                                int dim, cudaStream_t stream) {
  static cudaEvent_t done = nullptr;
  if (done == nullptr) cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  const int threads = 256;
  bias_relu_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
      x, bias, y, n, dim);
  cudaEventRecord(done, stream);
  cudaStreamWaitEvent(stream, done, 0);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="hon_30")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        n, dim = ctypes.c_longlong(x.numel()), ctypes.c_int(x.shape[-1])
        check_launch(_lib.launch_bias_relu(_p(x), _p(self.bias), _p(y), n, dim, stream))
        finished = torch.cuda.Event(enable_timing=False)
        finished.record()
        torch.cuda.current_stream().wait_event(finished)
        return y
