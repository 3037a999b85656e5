// y = a * x + y, with a plain C launcher: builds with nvcc alone (no torch headers) and is
// called with raw device pointers and the caller's stream.
#include <cuda_runtime.h>

__global__ void saxpy_kernel(int n, float a, const float* __restrict__ x, float* __restrict__ y) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        y[i] = a * x[i] + y[i];
    }
}

extern "C" cudaError_t saxpy(int n, float a, const float* x, float* y, cudaStream_t stream) {
    const int threads = 256;
    const int blocks = (n + threads - 1) / threads < 65535 ? (n + threads - 1) / threads : 65535;
    saxpy_kernel<<<blocks, threads, 0, stream>>>(n, a, x, y);
    return cudaGetLastError();
}
