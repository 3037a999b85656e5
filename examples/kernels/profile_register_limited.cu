// A kernel that keeps 96 floats live per thread, written to show occupancy limited by registers
// under Nsight Compute: with ~128 registers per thread only 2 blocks of 256 threads fit on an SM.
// Profile it: stitch-lsp profile examples/kernels/profile_register_limited.cu
#include <cstdio>
#include <cuda_runtime.h>

#define ACC 96

__global__ void many_accumulators(const float* __restrict__ x, float* __restrict__ out, int n, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float acc[ACC];
#pragma unroll
  for (int k = 0; k < ACC; ++k) acc[k] = x[(i + k * 32) % n];
  for (int t = 0; t < iters; ++t) {
#pragma unroll
    for (int k = 0; k < ACC; ++k) acc[k] = fmaf(acc[k], acc[(k + 1) % ACC], 0.5f);
  }
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < ACC; ++k) s += acc[k];
  out[i] = s;
}

int main() {
  const int n = 1 << 20, iters = 16;
  float *x = nullptr, *out = nullptr;
  if (cudaMalloc(&x, n * sizeof(float)) != cudaSuccess ||
      cudaMalloc(&out, n * sizeof(float)) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(x, 0, n * sizeof(float));
  many_accumulators<<<(n + 255) / 256, 256>>>(x, out, n, iters);
  cudaError_t err = cudaDeviceSynchronize();
  std::printf("many_accumulators: %s\n", cudaGetErrorString(err));
  cudaFree(x);
  cudaFree(out);
  return err == cudaSuccess ? 0 : 1;
}
