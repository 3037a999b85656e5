"""Language-server latency, measured as an editor sees it: a real `python -m stitch_lsp serve`
subprocess over stdio, driven by pygls's LanguageClient.

  (a) spawn -> `initialize` answered (cold start, imports included), and torch never imported
  (b) didOpen of a 3,000-line Python file with embedded CUDA -> publishDiagnostics
  (c) one-line incremental edit: server-side re-analysis time (from `stitch/debugInfo`) and
      end-to-end didChange -> publishDiagnostics with debounceMs = 0

Run: .venv/bin/python benchmarks/server_latency.py [--runs 50] [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

SERVER = [sys.executable, "-m", "stitch_lsp", "serve"]

CUDA_BLOCK = r"""
__global__ void {name}_kernel(const float* __restrict__ x, const float* __restrict__ b,
                              float* __restrict__ y, int64_t n, int64_t cols) {{
    __shared__ float tile[256];
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {{
        float v = x[i] + b[i % cols];
        tile[threadIdx.x] = v;
        __syncthreads();
        v = tile[threadIdx.x] > 0.0f ? tile[threadIdx.x] : 0.0f;
        y[i] = v * {scale}f;
        __syncthreads();
    }}
}}

torch::Tensor {name}(torch::Tensor x, torch::Tensor b) {{
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    const int threads = 256;
    const int blocks = (int)std::min<int64_t>((n + threads - 1) / threads, 65535);
    {name}_kernel<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(), n, xc.size(-1));
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}}
"""

MODULE_BLOCK = '''

class Block{i}(nn.Module):
    """Linear layer {i}, then a fused bias + ReLU + scale in CUDA."""

    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=False)
        self.bias = nn.Parameter(torch.randn(out_features))
        self.scale = {scale}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        h = ext{e}.fused{e}(h, self.bias)
        return h
'''


def make_source(target_lines: int = 3000, n_strings: int = 6) -> str:
    """A KernelBench-style solution file: several CUDA strings, many modules, ~3,000 lines."""
    parts = [
        '"""Generated benchmark input: a large solution file with CUDA in Python strings."""\n',
        "import torch",
        "import torch.nn as nn",
        "from torch.utils.cpp_extension import load_inline\n",
    ]
    for e in range(n_strings):
        kernels = "".join(
            CUDA_BLOCK.format(name=f"fused{e}" if k == 0 else f"fused{e}_{k}", scale=1 + k)
            for k in range(5)
        )
        parts.append(
            f'cuda_src{e} = r"""\n#include <torch/extension.h>\n'
            f'#include <ATen/cuda/CUDAContext.h>\n{kernels}"""\n'
        )
        decls = "\n".join(
            f"torch::Tensor {f'fused{e}' if k == 0 else f'fused{e}_{k}'}"
            "(torch::Tensor x, torch::Tensor b);"
            for k in range(5)
        )
        functions = [f"fused{e}" if k == 0 else f"fused{e}_{k}" for k in range(5)]
        parts.append(
            f'ext{e} = load_inline(\n    name="bench_ext{e}",\n'
            f'    cpp_sources="""{decls}""",\n    cuda_sources=cuda_src{e},\n'
            f"    functions={functions!r},\n)\n"
        )
    text = "\n".join(parts)
    i = 0
    while text.count("\n") < target_lines - 40:
        text += MODULE_BLOCK.format(i=i, e=i % n_strings, scale=1.0 + i / 100)
        i += 1
    text += (
        "\n\nclass ModelNew(nn.Module):\n"
        "    def __init__(self, in_features: int, out_features: int):\n"
        "        super().__init__()\n"
        "        self.first = Block0(in_features, out_features)\n\n"
        "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n"
        "        return self.first(x)\n\n\n"
        "def get_inputs():\n    return [torch.randn(128, 1024)]\n\n\n"
        "def get_init_inputs():\n    return [1024, 1024]\n"
    )
    return text


class BenchClient(LanguageClient):
    def __init__(self) -> None:
        super().__init__("stitch-bench", "1")
        self.waiters: dict[tuple[str, int | None], asyncio.Future[float]] = {}
        self.settings: dict[str, Any] = {"debounceMs": 0}

        @self.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        def on_diags(params: lsp.PublishDiagnosticsParams) -> None:
            now = time.perf_counter()
            for key in ((params.uri, params.version), (params.uri, None)):
                fut = self.waiters.pop(key, None)
                if fut is not None and not fut.done():
                    fut.set_result(now)

        @self.feature(lsp.WORKSPACE_CONFIGURATION)
        def on_config(params: lsp.ConfigurationParams) -> list[Any]:
            return [self.settings for _ in params.items]

        @self.feature(lsp.CLIENT_REGISTER_CAPABILITY)
        def on_register(params: lsp.RegistrationParams) -> None:
            return None

        @self.feature(lsp.WINDOW_LOG_MESSAGE)
        def on_log(params: lsp.LogMessageParams) -> None:
            return None

        @self.feature("stitch/status")
        def on_status(params: Any) -> None:
            return None

    def expect(self, uri: str, version: int | None) -> asyncio.Future[float]:
        fut = asyncio.get_running_loop().create_future()
        self.waiters[(uri, version)] = fut
        return fut


CAPS = lsp.ClientCapabilities(
    workspace=lsp.WorkspaceClientCapabilities(
        configuration=True,
        did_change_watched_files=lsp.DidChangeWatchedFilesClientCapabilities(
            dynamic_registration=True
        ),
    ),
    window=lsp.WindowClientCapabilities(work_done_progress=True),
)


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def start(root: Path) -> tuple[BenchClient, float, float, float]:
    """Spawn the server and initialize it.

    Returns (client, spawn -> answer s, request round trip s, server CPU s until the answer)."""
    client = BenchClient()
    t0 = time.perf_counter()
    await client.start_io(*SERVER)
    t1 = time.perf_counter()
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=CAPS,
            root_uri=root.as_uri(),
            initialization_options={"settings": {"debounceMs": 0}, "trusted": True},
        )
    )
    t2 = time.perf_counter()
    assert client._server is not None
    cpu = process_cpu_s(client._server.pid)
    client.initialized(lsp.InitializedParams())
    return client, t2 - t0, t2 - t1, cpu


async def stop(client: BenchClient) -> None:
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()


async def debug_info(client: BenchClient) -> Any:
    return await client.protocol.send_request_async("stitch/debugInfo", {})


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]


def summary(values_ms: list[float]) -> dict[str, float]:
    return {
        "n": len(values_ms),
        "p50_ms": round(statistics.median(values_ms), 2),
        "p95_ms": round(pct(values_ms, 95), 2),
        "max_ms": round(max(values_ms), 2),
    }


async def main_async(runs: int, starts: int, edit_mode: str) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="stitch-bench-"))
    source = make_source()
    results: dict[str, Any] = {"file_lines": source.count("\n"), "file_bytes": len(source)}

    # (a) cold starts
    cold, rtt, cpu = [], [], []
    for _ in range(starts):
        client, total, req, cpu_s = await start(root)
        cold.append(total * 1000)
        rtt.append(req * 1000)
        cpu.append(cpu_s * 1000)
        info = await debug_info(client)
        assert info.torchImported is False, "the server imported torch"
        await stop(client)
    results["initialize_cold_ms"] = summary(cold)
    results["initialize_request_ms"] = summary(rtt)
    results["initialize_server_cpu_ms"] = summary(cpu)

    client, _, _, _ = await start(root)
    await asyncio.sleep(0.5)  # let `initialized` finish (settings pull, warm-up)

    # (b) didOpen -> publishDiagnostics, a fresh document each time
    open_ms, open_analysis_ms, open_cpu_ms, open_publish_ms = [], [], [], []
    for i in range(runs):
        uri = (root / f"big_{i}.py").as_uri()
        fut = client.expect(uri, 1)
        t0 = time.perf_counter()
        client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(
                text_document=lsp.TextDocumentItem(
                    uri=uri, language_id="python", version=1, text=source
                )
            )
        )
        t1 = await asyncio.wait_for(fut, 30)
        open_ms.append((t1 - t0) * 1000)
        info = await debug_info(client)
        doc = next(d for d in info.documents if d.uri == uri)
        open_analysis_ms.append(doc.analysisMs)
        open_cpu_ms.append(doc.analysisCpuMs)
        open_publish_ms.append(doc.publishMs)
        client.text_document_did_close(
            lsp.DidCloseTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
        )
    results["open_to_diagnostics_ms"] = summary(open_ms)
    results["open_server_analysis_ms"] = summary(open_analysis_ms)
    results["open_server_analysis_cpu_ms"] = summary(open_cpu_ms)
    results["open_server_publish_ms"] = summary(open_publish_ms)

    # (c) one-line edits in one open document
    uri = (root / "edited.py").as_uri()
    fut = client.expect(uri, 1)
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=source
            )
        )
    )
    await asyncio.wait_for(fut, 30)
    lines = source.split("\n")
    # Edit lines in module bodies (self.scale = ...) and inside a CUDA string (the scale factor).
    py_lines = [i for i, s in enumerate(lines) if s.strip().startswith("self.scale =")]
    cu_lines = [i for i, s in enumerate(lines) if "y[i] = v *" in s]
    edit_e2e: dict[str, list[float]] = {"python": [], "cuda": []}
    edit_analysis: dict[str, list[float]] = {"python": [], "cuda": []}
    edit_publish: dict[str, list[float]] = {"python": [], "cuda": []}
    edit_cpu: dict[str, list[float]] = {"python": [], "cuda": []}
    edit_parse: dict[str, list[float]] = {"python": [], "cuda": []}
    version = 1

    async def send_edit(line: int, first: int, last: int, text: str) -> tuple[float, Any]:
        """One didChange; returns (didChange -> publishDiagnostics ms, the server's timings)."""
        nonlocal version
        version += 1
        fut = client.expect(uri, version)
        t0 = time.perf_counter()
        client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[
                    lsp.TextDocumentContentChangePartial(
                        range=lsp.Range(
                            start=lsp.Position(line=line, character=first),
                            end=lsp.Position(line=line, character=last),
                        ),
                        text=text,
                    )
                ],
            )
        )
        t1 = await asyncio.wait_for(fut, 30)
        info = await debug_info(client)
        doc = next(d for d in info.documents if d.uri == uri)
        assert doc.version == version
        return (t1 - t0) * 1000, doc

    def keystroke(line: int) -> tuple[int, int, str]:
        old = lines[line]
        col = max(i for i, ch in enumerate(old) if ch.isdigit())  # the constant's last digit
        new = old[:col] + str((int(old[col]) + 1) % 10) + old[col + 1 :]
        if edit_mode == "insert":  # one keystroke that lengthens the line: a digit typed after
            new = old[: col + 1] + "0" + old[col + 1 :]
            first, last, text = col + 1, col + 1, "0"
        elif edit_mode == "char":  # one keystroke: the digit typed over
            first, last, text = col, col + 1, new[col]
        else:  # the whole line replaced, indentation included
            first, last, text = 0, len(old), new
        lines[line] = new
        return first, last, text

    for r in range(runs * 2):
        kind = "python" if r % 2 == 0 else "cuda"
        pool = py_lines if kind == "python" else cu_lines
        line = pool[(r * 7) % len(pool)]
        e2e, doc = await send_edit(line, *keystroke(line))
        edit_e2e[kind].append(e2e)
        # Re-analysis = applying the edit (incremental re-parse) + analyze().
        edit_analysis[kind].append(doc.editMs + doc.analysisMs)
        edit_parse[kind].append(doc.editMs)
        edit_cpu[kind].append(doc.editCpuMs + doc.analysisCpuMs)
        edit_publish[kind].append(doc.publishMs)

    # (d) the same edits while the file has a syntax error: an unclosed `(` near the top
    # runs to the end of the file, so the whole file is one broken tree.
    top = next(i for i, s in enumerate(lines) if s.startswith("from torch.utils"))
    await send_edit(top, len(lines[top]), len(lines[top]), "(")
    broken: list[float] = []
    for r in range(runs):
        line = py_lines[(r * 7) % len(py_lines)]
        _, doc = await send_edit(line, *keystroke(line))
        broken.append(doc.editMs + doc.analysisMs)
    await send_edit(top, len(lines[top]), len(lines[top]) + 1, "")
    results["edit_broken_file_server_analysis_ms"] = summary(broken)
    for kind in ("python", "cuda"):
        results[f"edit_{kind}_server_analysis_ms"] = summary(edit_analysis[kind])
        results[f"edit_{kind}_server_reparse_ms"] = summary(edit_parse[kind])
        results[f"edit_{kind}_server_analysis_cpu_ms"] = summary(edit_cpu[kind])
        results[f"edit_{kind}_server_publish_ms"] = summary(edit_publish[kind])
        results[f"edit_{kind}_to_diagnostics_ms"] = summary(edit_e2e[kind])
    info = await debug_info(client)
    results["torch_imported"] = info.torchImported
    await stop(client)
    return results


ROWS = [
    ("spawn -> `initialize` answered (wall, includes Python start and imports)",
     "initialize_cold_ms", None, "< 1 s"),
    ("server CPU used until `initialize` was answered", "initialize_server_cpu_ms", None, ""),
    ("didOpen -> publishDiagnostics (wall, not debounced)", "open_to_diagnostics_ms", None,
     "p95 < 50 ms"),
    ("didOpen: analysis in the server (wall / CPU)", "open_server_analysis_ms",
     "open_server_analysis_cpu_ms", ""),
    ("one-line edit in Python code: re-parse + re-analysis in the server (wall / CPU)",
     "edit_python_server_analysis_ms", "edit_python_server_analysis_cpu_ms", "p95 < 10 ms"),
    ("...of which applying the edit and re-parsing the Python", "edit_python_server_reparse_ms",
     None, ""),
    ("one-line edit inside a CUDA string: re-parse + re-analysis (wall / CPU)",
     "edit_cuda_server_analysis_ms", "edit_cuda_server_analysis_cpu_ms", "p95 < 10 ms"),
    ("one-line edit in Python code while an unclosed `(` near the top breaks the file",
     "edit_broken_file_server_analysis_ms", None, ""),
    ("one-line edit -> publishDiagnostics, debounceMs 0 (wall), Python line",
     "edit_python_to_diagnostics_ms", None, ""),
    ("one-line edit -> publishDiagnostics, debounceMs 0 (wall), CUDA line",
     "edit_cuda_to_diagnostics_ms", None, ""),
]  # fmt: skip


def markdown(results: dict[str, Any]) -> str:
    """The BENCHMARKS.md table for these results."""

    def num(x: float) -> str:
        return f"{x:.0f}" if x >= 100 else f"{x:.1f}"

    def fmt(key: str, cpu: str | None, stat: str) -> str:
        wall = num(results[key][stat])
        return f"{wall} ms" if cpu is None else f"{wall} / {num(results[cpu][stat])} ms"

    out = ["| measurement | n | p50 | p95 | target |", "|---|---|---|---|---|"]
    for label, key, cpu, target in ROWS:
        n = results[key]["n"]
        out.append(
            f"| {label} | {n} | {fmt(key, cpu, 'p50_ms')} | {fmt(key, cpu, 'p95_ms')} | {target} |"
        )
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--starts", type=int, default=5, help="cold starts to time")
    ap.add_argument(
        "--edit",
        choices=("char", "insert", "line"),
        default="char",
        help="char: type over one character (a keystroke); insert: type one more character, "
        "so the text after it moves; line: replace the whole line",
    )
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--markdown", action="store_true", help="also print the BENCHMARKS.md table")
    args = ap.parse_args()
    results = asyncio.run(main_async(args.runs, args.starts, args.edit))
    results["edit_mode"] = args.edit
    results["machine"] = (
        f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    if args.markdown:
        print(markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
