"""A KernelBench-format file whose CUDA lives in a Python string, for profiling in the editor.

`ModelNew` transposes a matrix with a naive kernel: the loads are coalesced but the stores are
`rows` floats apart, so Nsight Compute flags the store line as uncoalesced. The diagnostics land
on that line of the string below.  Profile it: stitch-lsp profile examples/kernels/profile_inline_transpose.py
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>

__global__ void transpose_inline(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < cols && y < rows) {
    out[x * rows + y] = in[y * cols + x];
  }
}

torch::Tensor transpose(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat, "want a 2-D float CUDA tensor");
  x = x.contiguous();
  int rows = x.size(0), cols = x.size(1);
  auto out = torch::empty({cols, rows}, x.options());
  dim3 block(32, 8);
  dim3 grid((cols + block.x - 1) / block.x, (rows + block.y - 1) / block.y);
  transpose_inline<<<grid, block>>>(x.data_ptr<float>(), out.data_ptr<float>(), rows, cols);
  return out;
}
"""

cpp_source = "torch::Tensor transpose(torch::Tensor x);"

transpose_ext = load_inline(
    name="stitch_profile_inline_transpose",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["transpose"],
    extra_cuda_cflags=["-O3", "-lineinfo"],
    verbose=False,
)


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.t().contiguous()


class ModelNew(nn.Module):
    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return transpose_ext.transpose(x)


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(4096, 4096)]


def get_init_inputs() -> list:
    return []
