"""How fast the analysis layer answers the editor.

Generates a ~3,000-line Python file (many nn.Module classes, a ModelNew candidate, several large
CUDA strings passed to load_inline) and measures, over N runs:

  open: Document(...) + analyze()  (what didOpen pays: full parse + all checks), with the
        CUDA strings already in the content cache, and again with them parsed afresh
  edit: one-line incremental change + analyze()  (what didChange pays), for a character typed
        in Python code, a newline in Python code, and a character typed inside a CUDA string
  outline: the symbols of a fresh analysis (computed on first use, for documentSymbol)

Usage: python benchmarks/analysis_speed.py [--runs 200] [--lines 3000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

from stitch_lsp.analysis import Document, analyze, warm_up
from stitch_lsp.analysis.cuda_facts import SOURCES

CUDA_KERNEL = """
__global__ void {name}(const float* __restrict__ x, const float* __restrict__ b,
                       float* __restrict__ y, long long n, int cols) {{
    __shared__ float tile[256];
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) {{
        tile[threadIdx.x] = x[i] + b[i % cols];
    }}
    __syncthreads();
    if (i < n) {{
        float v = tile[threadIdx.x];
        y[i] = v > 0.f ? v : 0.f;
    }}
}}

torch::Tensor {name}_launch(torch::Tensor x, torch::Tensor b) {{
    auto y = torch::empty_like(x);
    const long long n = x.numel();
    const int threads = 256;
    {name}<<<(unsigned)((n + threads - 1) / threads), threads, 0,
        at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), b.data_ptr<float>(),
        y.data_ptr<float>(), n, (int)x.size(-1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}}
"""

MODULE = '''

class Block{i}(nn.Module):
    """Block {i}: a linear layer, a bias and an activation."""

    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = nn.Parameter(torch.ones(out_features))

    def forward(self, x):
        x = self.linear(x)
        x = x * self.scale
        x = torch.relu(x)
        return x.view(x.size(0), -1)
'''


def generate(lines: int, kernels_per_string: int = 12, strings: int = 4) -> str:
    parts = [
        "import torch\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load_inline\n"
    ]
    for s in range(strings):
        body = "".join(CUDA_KERNEL.format(name=f"k{s}_{k}") for k in range(kernels_per_string))
        decls = "\n".join(
            f"torch::Tensor k{s}_{k}_launch(torch::Tensor x, torch::Tensor b);"
            for k in range(kernels_per_string)
        )
        parts.append(f'\ncuda_src_{s} = r"""\n#include <torch/extension.h>\n{body}"""\n')
        parts.append(f'cpp_src_{s} = """\n{decls}\n"""\n')
        names = ", ".join(repr(f"k{s}_{k}_launch") for k in range(kernels_per_string))
        parts.append(
            f"ext_{s} = load_inline(name='ext_{s}', cpp_sources=cpp_src_{s}, "
            f"cuda_sources=cuda_src_{s}, functions=[{names}])\n"
        )
    parts.append(
        "\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n"
        "        self.linear = nn.Linear(n, n)\n        self.b = nn.Parameter(torch.zeros(n))\n\n"
        "    def forward(self, x):\n        return ext_0.k0_0_launch(self.linear(x), self.b)\n"
    )
    i = 0
    while sum(p.count("\n") for p in parts) < lines:
        parts.append(MODULE.format(i=i))
        i += 1
    parts.append(
        "\n\ndef get_inputs():\n    return [torch.rand(16, 16)]\n\n"
        "def get_init_inputs():\n    return [16]\n"
    )
    return "".join(parts)


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Timer:
    """Wall-clock and CPU time (this thread) of each sample: on a shared machine the wall time
    includes waiting for a core, the CPU time is what the analysis itself costs."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self) -> Timer:
        self._w, self._c = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cpu.append((time.thread_time() - self._c) * 1e3)
        self.wall.append((time.perf_counter() - self._w) * 1e3)

    def stats(self) -> dict:
        def s(samples: list[float]) -> dict:
            return {
                "p50_ms": round(statistics.median(samples), 2),
                "p95_ms": round(percentile(samples, 0.95), 2),
                "max_ms": round(max(samples), 2),
            }

        return {"n": len(self.wall), "wall": s(self.wall), "cpu": s(self.cpu)}


def measure(runs: int, lines: int) -> dict:
    text = generate(lines)
    n_lines = text.count("\n")
    uri = "file:///bench/generated.py"

    # Compiled queries and parsed CUDA strings are cached, as in a running server.
    warm_up()
    analyze(Document(uri, text, "python"))

    opened = Timer()
    for _ in range(runs):
        with opened:
            result = analyze(Document(uri, text, "python"))
            _ = result.diagnostics

    # First open of a file whose CUDA strings were never seen: they are parsed too.
    opened_cold = Timer()
    for _ in range(min(runs, 50)):
        SOURCES.clear()
        with opened_cold:
            analyze(Document(uri, text, "python"))

    doc = Document(uri, text, "python")
    analyze(doc)
    lines_list = text.split("\n")
    py_line = next(i for i, s in enumerate(lines_list) if "x = x * self.scale" in s)
    cu_line = next(i for i, s in enumerate(lines_list) if "tile[threadIdx.x] = x[i]" in s)

    def edits(line: int, inserted: str) -> Timer:
        timer = Timer()
        col = len(lines_list[line])
        for _ in range(runs):
            # Type at the end of the line, then undo it: two didChange events, each analysed
            # as the server does after its debounce.
            with timer:
                doc.apply_change((line, col, line, col), inserted)
                analyze(doc)
            end = (line + 1, 0) if inserted == "\n" else (line, col + len(inserted))
            with timer:
                doc.apply_change((line, col, *end), "")
                analyze(doc)
        assert doc.text == text
        return timer

    py_edit = edits(py_line, " ")
    py_newline = edits(py_line, "\n")
    cu_edit = edits(cu_line, " ")

    outline = Timer()
    for _ in range(min(runs, 50)):
        fresh = analyze(Document(uri, text, "python"))
        with outline:
            _ = fresh.symbols

    return {
        "lines": n_lines,
        "bytes": len(text.encode()),
        "modules": len(result.modules),
        "kernels": len(result.kernels),
        "launches": len(result.launches),
        "cuda_strings": len(result.embedded),
        "diagnostics": len(result.diagnostics),
        "open": opened.stats(),
        "open_new_cuda_strings": opened_cold.stats(),
        "edit_python_line": py_edit.stats(),
        "newline_python": py_newline.stats(),
        "edit_cuda_line": cu_edit.stats(),
        "outline_after_open": outline.stats(),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--json", help="also write the figures to this file")
    args = parser.parse_args()
    figures = measure(args.runs, args.lines)
    print(json.dumps(figures, indent=2))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(figures, fh, indent=2)


if __name__ == "__main__":
    main()
