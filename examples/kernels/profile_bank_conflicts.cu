// A tiled transpose whose shared-memory tile has no padding column, written to show shared-memory
// bank conflicts under Nsight Compute. Reading the tile down a column makes all 32 threads of a
// warp hit the same bank; declaring the tile [TILE][TILE + 1] removes the conflict.
// Profile it: stitch-lsp profile examples/kernels/profile_bank_conflicts.cu
#include <cstdio>
#include <cuda_runtime.h>

#define TILE 32
#define ROWS_PER_PASS 8

__global__ void transpose_tiled_conflicts(const float* __restrict__ in, float* __restrict__ out, int n) {
  __shared__ float tile[TILE][TILE];  // no padding: column reads conflict
  int x = blockIdx.x * TILE + threadIdx.x;
  int y = blockIdx.y * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS_PER_PASS) {
    tile[threadIdx.y + j][threadIdx.x] = in[(y + j) * n + x];
  }
  __syncthreads();
  x = blockIdx.y * TILE + threadIdx.x;
  y = blockIdx.x * TILE + threadIdx.y;
  for (int j = 0; j < TILE; j += ROWS_PER_PASS) {
    out[(y + j) * n + x] = tile[threadIdx.x][threadIdx.y + j];
  }
}

int main() {
  const int n = 4096;  // a multiple of TILE
  const size_t bytes = size_t(n) * n * sizeof(float);
  float *in = nullptr, *out = nullptr;
  if (cudaMalloc(&in, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess) {
    std::fprintf(stderr, "cudaMalloc failed\n");
    return 1;
  }
  cudaMemset(in, 0, bytes);
  dim3 block(TILE, ROWS_PER_PASS);
  dim3 grid(n / TILE, n / TILE);
  transpose_tiled_conflicts<<<grid, block>>>(in, out, n);
  cudaError_t err = cudaDeviceSynchronize();
  std::printf("transpose_tiled_conflicts: %s\n", cudaGetErrorString(err));
  cudaFree(in);
  cudaFree(out);
  return err == cudaSuccess ? 0 : 1;
}
