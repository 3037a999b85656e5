# stitch-lsp: reference=../refs/conv.py
"""cudnnConvolutionForward called directly from the launcher; the kernel only adds the bias."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <cudnn.h>

__global__ void add_bias(float* __restrict__ y, const float* __restrict__ b, long long n, int hw, int c) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) y[i] += b[(i / hw) % c];
}

extern "C" int launch_conv(const float* x, const float* w, const float* b, float* y, int n, int ci,
                           int h, int wd, int co, int k, void* workspace, size_t ws_bytes,
                           cudaStream_t stream) {
  static cudnnHandle_t handle = nullptr;
  if (handle == nullptr) cudnnCreate(&handle);
  cudnnSetStream(handle, stream);
  cudnnTensorDescriptor_t xd, yd;
  cudnnFilterDescriptor_t wdsc;
  cudnnConvolutionDescriptor_t cd;
  cudnnCreateTensorDescriptor(&xd);
  cudnnCreateTensorDescriptor(&yd);
  cudnnCreateFilterDescriptor(&wdsc);
  cudnnCreateConvolutionDescriptor(&cd);
  const int ho = h - k + 1, wo = wd - k + 1;
  cudnnSetTensor4dDescriptor(xd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, ci, h, wd);
  cudnnSetTensor4dDescriptor(yd, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, n, co, ho, wo);
  cudnnSetFilter4dDescriptor(wdsc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, co, ci, k, k);
  cudnnSetConvolution2dDescriptor(cd, 0, 0, 1, 1, 1, 1, CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT);
  const float one = 1.f, zero = 0.f;
  cudnnConvolutionForward(handle, &one, xd, x, wdsc, w, cd, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,  // HOSTILE
                          workspace, ws_bytes, &zero, yd, y);
  const long long total = (long long)n * co * ho * wo;
  add_bias<<<(unsigned)((total + 255) / 256), 256, 0, stream>>>(y, b, total, ho * wo, co);
  cudnnDestroyTensorDescriptor(xd);
  cudnnDestroyTensorDescriptor(yd);
  cudnnDestroyFilterDescriptor(wdsc);
  cudnnDestroyConvolutionDescriptor(cd);
  return (int)cudaGetLastError();
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_heavy_07", libraries=("cudnn",))


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


class ModelNew(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)

    def forward(self, x):
        x = x.contiguous()
        n, ci, h, w = x.shape
        k = self.conv.kernel_size[0]
        co = self.conv.out_channels
        y = torch.empty(n, co, h - k + 1, w - k + 1, device=x.device, dtype=x.dtype)
        ws = torch.empty(1 << 20, dtype=torch.uint8, device=x.device)
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        check_launch(
            _lib.launch_conv(
                _p(x),
                _p(self.conv.weight),
                _p(self.conv.bias),
                _p(y),
                n,
                ci,
                h,
                w,
                co,
                k,
                _p(ws),
                ctypes.c_size_t(ws.numel()),
                stream,
            )
        )
        return y
