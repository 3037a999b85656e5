// A .cu file built through torch.utils.cpp_extension.load; line 4 does not compile.
__global__ void scale(float* y, const float* x, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + not_declared;
}
