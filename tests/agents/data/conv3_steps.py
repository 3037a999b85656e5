"""A scripted Coder for the step-by-step run on conv3_scan.py: it reads the partial program in
its prompt and writes the logcumsumexp group (the one the builtin generator refuses) in CUDA, as
an LLM would: the convolution stays on cuDNN, a kernel does the running log-sum-exp along the
last dim."""

from __future__ import annotations

import re

HELPER = '''
import ctypes as _ctypes

from stitch_lsp.runtime.fastcuda import check_launch as _check_launch
from stitch_lsp.runtime.fastcuda import load_cuda as _load_cuda

_SCAN_SRC = r"""
#include <cuda_runtime.h>
#include <math.h>

// y[r, i] = log(sum_{j <= i} exp(x[r, j])) for rows of length n, one thread per row, in order,
// each step as max + log1p(exp(min - max)).
__global__ void row_logcumsumexp(const float* __restrict__ x, float* __restrict__ y,
                                 long long rows, int n) {
    long long r = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + r * n;
    float* yr = y + r * n;
    float acc = -INFINITY;
    for (int i = 0; i < n; ++i) {
        float v = xr[i];
        float hi = fmaxf(acc, v);
        float lo = fminf(acc, v);
        acc = (lo == -INFINITY) ? hi : hi + log1pf(expf(lo - hi));
        yr[i] = acc;
    }
}

extern "C" int row_logcumsumexp_launch(const float* x, float* y, long long rows, int n,
                                       cudaStream_t stream) {
    const int threads = 128;
    long long blocks = (rows + threads - 1) / threads;
    row_logcumsumexp<<<(unsigned)blocks, threads, 0, stream>>>(x, y, rows, n);
    return (int)cudaGetLastError();
}
"""

_scan_lib = _load_cuda(_SCAN_SRC, name="conv3_row_logcumsumexp")


def _row_logcumsumexp(x):
    """torch.logcumsumexp(x, dim=-1) in one kernel on the current stream."""
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.shape[-1]
    stream = _ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    code = _scan_lib.row_logcumsumexp_launch(
        _ctypes.c_void_p(x.data_ptr()),
        _ctypes.c_void_p(y.data_ptr()),
        _ctypes.c_longlong(x.numel() // n),
        _ctypes.c_int(n),
        stream,
    )
    _check_launch(code, _scan_lib, "row_logcumsumexp_launch")
    return y

'''

_PROGRAM = re.compile(r"The current partial program:\n```python\n(.*?)\n```", re.S)
_LAST = re.compile(r"Your last version:\n```python\n(.*?)\n```", re.S)
_BLOCK = re.compile(r"(        # >>> stitch k2[^\n]*\n)(.*?)(        # <<< stitch k2)", re.S)


def write_scan_group(prompt: str, *, broken: bool = False) -> str:
    """The reply to subtask 2's prompt: its program with the k2 block in CUDA."""
    m = _PROGRAM.search(prompt)
    if m is None:
        return "I cannot find the partial program in the prompt."
    program = m.group(1)
    body = "        conv2 = self.conv2(relu)\n        logcumsumexp = _row_logcumsumexp(conv2)\n"
    program = _BLOCK.sub(lambda b: b.group(1) + body + b.group(3), program, count=1)
    helper = HELPER.replace("float acc", "flaot acc") if broken else HELPER
    at = program.index("\nclass ModelNew")
    program = program[:at] + "\n" + helper + program[at:]
    return f"The running log-sum-exp in one kernel per row.\n\n```python\n{program}\n```\n"


def repair(prompt: str) -> str:
    """The reply to a repair prompt: the last version with the typo fixed."""
    m = _LAST.search(prompt)
    if m is None:
        return "I cannot find the last version in the prompt."
    fixed = m.group(1).replace("flaot acc", "float acc")
    return f"Fixed the type name.\n\n```python\n{fixed}\n```\n"
