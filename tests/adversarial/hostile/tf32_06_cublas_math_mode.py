# stitch-lsp: reference=../refs/matmul.py
"""cuBLAS told to use TF32 tensor cores for an fp32 GEMM."""

import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime import check_launch, load_cuda

CUDA_SRC = r"""
#include <cuda_runtime.h>
#include <cublas_v2.h>

extern "C" int launch_gemm(const float* A, const float* B, float* C, int N, cudaStream_t stream) {
  static cublasHandle_t handle = nullptr;
  if (!handle && cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return -1;
  cublasSetStream(handle, stream);
  cublasSetMathMode(handle, CUBLAS_TF32_TENSOR_OP_MATH);  // HOSTILE
  const float one = 1.f, zero = 0.f;
  // Row-major C = A B is column-major C^T = B^T A^T.
  if (cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, N, N, &one, B, N, A, N, &zero, C, N)
      != CUBLAS_STATUS_SUCCESS) return -2;
  return 0;
}
"""

_lib = load_cuda(CUDA_SRC, name="adv_tf32_06")


def _p(t):
    return ctypes.c_void_p(t.data_ptr())


def _stream():
    return ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)


class ModelNew(nn.Module):
    def forward(self, A, B):
        A, B = A.contiguous(), B.contiguous()
        C = torch.empty(A.shape[0], B.shape[1], device=A.device, dtype=A.dtype)
        check_launch(_lib.launch_gemm(_p(A), _p(B), _p(C), ctypes.c_int(A.shape[0]), _stream()))
        return C
