# stitch-lsp: reference=../refs/relu_bias.py
"""The launcher copies to the host and loops there."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <vector>

extern "C" int launch_bias_relu(const float* x, const float* bias, float* y, long long n,
                                int dim, cudaStream_t stream) {
  std::vector<float> hx(n), hb(dim);
  cudaMemcpy(hx.data(), x, n * sizeof(float), cudaMemcpyDeviceToHost);  // HOSTILE
  cudaMemcpy(hb.data(), bias, dim * sizeof(float), cudaMemcpyDeviceToHost);
  for (long long i = 0; i < n; ++i) hx[i] = hx[i] + hb[i % dim] > 0.f ? hx[i] + hb[i % dim] : 0.f;
  return (int)cudaMemcpyAsync(y, hx.data(), n * sizeof(float), cudaMemcpyHostToDevice, stream);
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_cpu_05")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


def _bias_relu(x, bias):
    y = torch.empty_like(x)
    n, dim = ctypes.c_longlong(x.numel()), ctypes.c_int(x.shape[-1])
    check_launch(_lib.launch_bias_relu(_p(x), _p(bias), _p(y), n, dim, _stream()))
    return y


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim))

    def forward(self, x):
        return _bias_relu(x.contiguous(), self.bias)
