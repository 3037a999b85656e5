"""Real programs for the step-by-step run on mlp3.py, as a Coder would write them.

`partial(done)` is the partial program with the groups in `done` (1, 2, 3) in CUDA and the rest
in PyTorch, inside the scaffold's `# >>> stitch kN` blocks; `stitched()` is the whole program
without blocks. One tiled fp32 GEMM kernel with a fused bias and activation serves every group.
"""

from __future__ import annotations

CUDA = r"""
#include <cuda_runtime.h>

#define TILE 16

// y = act(x @ w^T + b): x [M, K], w [N, K], b [N], y [M, N]; act 1 relu, 2 tanh * scale,
// 3 sigmoid. fp32 accumulation in shared-memory tiles.
__global__ void linear_act(const float* __restrict__ x, const float* __restrict__ w,
                           const float* __restrict__ b, float* __restrict__ y,
                           int M, int N, int K, int act, float scale) {
    __shared__ float xs[TILE][TILE + 1];
    __shared__ float ws[TILE][TILE + 1];
    int row = blockIdx.y * TILE + threadIdx.y;
    int col = blockIdx.x * TILE + threadIdx.x;
    int wrow = blockIdx.x * TILE + threadIdx.y;
    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        int kx = k0 + threadIdx.x;
        xs[threadIdx.y][threadIdx.x] = (row < M && kx < K) ? x[(long long)row * K + kx] : 0.f;
        ws[threadIdx.y][threadIdx.x] = (wrow < N && kx < K) ? w[(long long)wrow * K + kx] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += xs[threadIdx.y][k] * ws[threadIdx.x][k];
        __syncthreads();
    }
    if (row < M && col < N) {
        float v = acc + b[col];
        if (act == 1) v = fmaxf(v, 0.f);
        else if (act == 2) v = tanhf(v) * scale;
        else if (act == 3) v = 1.f / (1.f + expf(-v));
        y[(long long)row * N + col] = v;
    }
}

extern "C" int linear_act_launch(const float* x, const float* w, const float* b, float* y,
                                 int M, int N, int K, int act, float scale,
                                 cudaStream_t stream) {
    dim3 block(TILE, TILE);
    dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
    linear_act<<<grid, block, 0, stream>>>(x, w, b, y, M, N, K, act, scale);
    return (int)cudaGetLastError();
}
"""

HEAD = '''import ctypes

import torch
import torch.nn as nn

from stitch_lsp.runtime.fastcuda import check_launch, load_cuda

CUDA_SRC = r"""__CUDA__"""

_lib = load_cuda(CUDA_SRC, name="mlp3_linear_act")


def _linear_act(x, layer, act, scale=1.0):
    """act(x @ layer.weight^T + layer.bias) in one kernel on the current stream."""
    x = x.contiguous()
    m, k = x.shape
    n = layer.weight.shape[0]
    y = torch.empty((m, n), device=x.device, dtype=x.dtype)
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    code = _lib.linear_act_launch(
        ctypes.c_void_p(x.data_ptr()),
        ctypes.c_void_p(layer.weight.data_ptr()),
        ctypes.c_void_p(layer.bias.data_ptr()),
        ctypes.c_void_p(y.data_ptr()),
        ctypes.c_int(m),
        ctypes.c_int(n),
        ctypes.c_int(k),
        ctypes.c_int(act),
        ctypes.c_float(scale),
        stream,
    )
    check_launch(code, _lib, "linear_act_launch")
    return y


class ModelNew(torch.nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_out: int):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_hidden)
        self.fc3 = nn.Linear(d_hidden, d_out)

    def forward(self, x):
'''

_GROUPS = {
    1: (
        "linear+relu",
        ["fc1 = self.fc1(x)", "relu = torch.relu(fc1)"],
        ["relu = _linear_act(x, self.fc1, 1)"],
    ),
    2: (
        "linear+tanh+mul",
        ["fc2 = self.fc2(relu)", "tanh = torch.tanh(fc2)", "mul = tanh * 0.5"],
        ["mul = _linear_act(relu, self.fc2, 2, 0.5)"],
    ),
    3: (
        "linear+sigmoid",
        ["fc3 = self.fc3(mul)", "sigmoid = torch.sigmoid(fc3)"],
        ["sigmoid = _linear_act(mul, self.fc3, 3)"],
    ),
}


def partial(done: set[int], *, broken: bool = False, marker: str = "") -> str:
    """The program with groups `done` in CUDA; `broken` puts a compile error in the kernel;
    `marker` is a comment line added at the top (the fake Verifier reads one)."""
    cuda = CUDA.replace("blockIdx.y * TILE", "blockIdy.y * TILE", 1) if broken else CUDA
    lines = [HEAD.replace("__CUDA__", cuda).rstrip("\n")]
    for k, (label, torch_lines, cuda_lines) in _GROUPS.items():
        lines.append(f"        # >>> stitch k{k} · subtask {k}/3: {label}")
        lines += [f"        {s}" for s in (cuda_lines if k in done else torch_lines)]
        lines.append(f"        # <<< stitch k{k}")
    lines.append("        return sigmoid")
    text = "\n".join(lines) + "\n"
    return f"# {marker}\n{text}" if marker else text


def stitched(*, marker: str = "") -> str:
    """The whole program after the stitch step: the same kernels, no blocks."""
    lines = [HEAD.replace("__CUDA__", CUDA).rstrip("\n")]
    for _, (_, _, cuda_lines) in _GROUPS.items():
        lines += [f"        {s}" for s in cuda_lines]
    lines.append("        return sigmoid")
    text = "\n".join(lines) + "\n"
    return f"# {marker}\n{text}" if marker else text


def fenced(code: str, what: str = "Here is the program.") -> str:
    return f"{what}\n\n```python\n{code}```\n"
