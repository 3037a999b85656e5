# stitch-lsp: reference=../refs/softmax_wide.py
"""Everything below the tolerance is written as zero: here, every output."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
// One block per row: max, sum of exponentials, then the normalised values.
__global__ void softmax_kernel(const float* __restrict__ x, float* __restrict__ y, int dim) {
  __shared__ float red[256];
  const float* row = x + (long long)blockIdx.x * dim;
  float* out = y + (long long)blockIdx.x * dim;
  float m = -INFINITY;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) m = fmaxf(m, row[j]);
  red[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] = fmaxf(red[threadIdx.x], red[threadIdx.x + s]);
    __syncthreads();
  }
  m = red[0];
  __syncthreads();
  float sum = 0.f;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) sum += __expf(row[j] - m);
  red[threadIdx.x] = sum;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
    __syncthreads();
  }
  const float inv = 1.f / red[0];
  for (int j = threadIdx.x; j < dim; j += blockDim.x) {
    const float v = __expf(row[j] - m) * inv;
    out[j] = v < 1e-4f ? 0.f : v;  // HOSTILE
  }
}

extern "C" int launch_softmax(const float* x, float* y, long long n, int dim,
                              cudaStream_t stream) {
  softmax_kernel<<<(unsigned)(n / dim), 256, 0, stream>>>(x, y, dim);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_belowatol_01")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = ctypes.c_longlong(x.numel())
        check_launch(_lib.launch_softmax(_p(x), _p(y), n, ctypes.c_int(x.shape[-1]), _stream()))
        return y
