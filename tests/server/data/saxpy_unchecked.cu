#include <cuda_runtime.h>

__global__ void saxpy(int n, float a, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + y[i];
}

__global__ void never_used(float* y) { y[0] = 0.0f; }

extern "C" void launch_saxpy(int n, float a, const float* x, float* y, cudaStream_t s) {
    saxpy<<<(n + 99) / 100, 100, 0, s>>>(n, a, x, y);
}
