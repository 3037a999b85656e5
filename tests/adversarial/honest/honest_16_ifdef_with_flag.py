# stitch-lsp: reference=../refs/relu_bias.py
"""Preprocessor branches the build really takes."""

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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const float v = __ldg(&x[i]) + __ldg(&bias[i % dim]);
#else
    const float v = x[i] + bias[i % dim];
#endif
    y[i] = v > 0.f ? v : 0.f;
  }
}

__global__ void bias_relu_vec4(const float4* __restrict__ x, const float* __restrict__ bias,
                               float4* __restrict__ y, long long n4, int dim) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n4) {
    float4 v = x[i];
    const int c = (int)((i * 4) % dim);
    v.x = fmaxf(v.x + bias[c], 0.f);
    v.y = fmaxf(v.y + bias[c + 1], 0.f);
    v.z = fmaxf(v.z + bias[c + 2], 0.f);
    v.w = fmaxf(v.w + bias[c + 3], 0.f);
    y[i] = v;
  }
}

extern "C" int launch_bias_relu(const float* x, const float* bias, float* y, long long n,
                                int dim, cudaStream_t stream) {
  const int threads = 256;
#ifdef USE_VEC4
  if (dim % 4 == 0) {
    const long long n4 = n / 4;
    bias_relu_vec4<<<(unsigned)((n4 + threads - 1) / threads), threads, 0, stream>>>(
        reinterpret_cast<const float4*>(x), bias, reinterpret_cast<float4*>(y), n4, dim);
    return (int)cudaGetLastError();
  }
#endif
  bias_relu_kernel<<<(unsigned)((n + threads - 1) / threads), threads, 0, stream>>>(
      x, bias, y, n, dim);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="hon_16", extra_flags=["-DUSE_VEC4"])


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
