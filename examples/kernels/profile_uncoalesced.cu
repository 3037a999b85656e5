// A naive matrix transpose, written to show an uncoalesced global store under Nsight Compute.
// Neighbouring threads read neighbouring floats (coalesced), but they write floats `rows`
// apart, so every warp's store touches 32 sectors instead of 4.
// Profile it: stitch-lsp profile examples/kernels/profile_uncoalesced.cu
#include <cstdio>
#include <cuda_runtime.h>

__global__ void transpose_naive(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;  // column in `in`
  int y = blockIdx.y * blockDim.y + threadIdx.y;  // row in `in`
  if (x < cols && y < rows) {
    out[x * rows + y] = in[y * cols + x];
  }
}

int main() {
  const int rows = 4096, cols = 4096;
  const size_t bytes = size_t(rows) * cols * sizeof(float);
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(in, 0, bytes);
  dim3 block(32, 8);
  dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
  transpose_naive<<<grid, block>>>(in, out, rows, cols);
  cudaError_t err = cudaDeviceSynchronize();
  std::printf("transpose_naive: %s\n", cudaGetErrorString(err));
  cudaFree(in);
  cudaFree(out);
  return err == cudaSuccess ? 0 : 1;
}
