# stitch-lsp: reference=../../../examples/gemm_add_relu.py
"""The shape stitch-lsp generates: an extern "C" launcher built by nvcc alone, called through
ctypes with raw device pointers and the current stream. cuBLAS keeps the GEMM."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

SOURCE = r"""
#include <cuda_runtime.h>
#include <cublas_v2.h>

__global__ void add_relu_kernel(float* __restrict__ y, const float* __restrict__ bias,
                                long long n, int cols) {
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {
        float v = y[i] + bias[i % cols];
        y[i] = v > 0.f ? v : 0.f;
    }
}

extern "C" int gemm_add_relu(const float* x, const float* w, const float* bias, float* y,
                             int m, int n, int k, cudaStream_t stream) {
    static cublasHandle_t handle = nullptr;
    if (!handle && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return -1;
    cublasSetStream(handle, stream);
    const float one = 1.f, zero = 0.f;
    if (cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &one, w, k, x, k, &zero, y, n)
        != CUBLAS_STATUS_SUCCESS) return -2;
    const long long total = (long long)m * n;
    const int threads = 256;
    add_relu_kernel<<<(unsigned)((total + threads - 1) / threads), threads, 0, stream>>>(
        y, bias, total, n);
    return (int)cudaGetLastError();
}
"""

_lib = load_cuda(SOURCE, name="gemm_add_relu")


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        m, k = x.shape
        n = self.gemm.weight.shape[0]
        y = torch.empty((m, n), device=x.device, dtype=x.dtype)
        stream = torch.cuda.current_stream().cuda_stream
        check_launch(
            _lib.gemm_add_relu(
                ctypes.c_void_p(x.data_ptr()),
                ctypes.c_void_p(self.gemm.weight.data_ptr()),
                ctypes.c_void_p(self.bias.data_ptr()),
                ctypes.c_void_p(y.data_ptr()),
                m,
                n,
                k,
                ctypes.c_void_p(stream),
            )
        )
        return y
