// Deliberately bad CUDA: a kernel nobody launches, a block of 100 threads, no error check.
#include <cuda_runtime.h>

__global__ void unused_kernel(float* x) { x[threadIdx.x] = 0.f; }

__global__ void scale_kernel(float* x, float a, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= a;
}

void scale(float* x, float a, int n) {
    scale_kernel<<<(n + 99) / 100, 100>>>(x, a, n);
    dim3 block(30, 1);
    scale_kernel<<<n, block>>>(x, a, n);
    cudaStream_t side;
    cudaStreamCreate(&side);
}
