"""Fakes for the loop's collaborators: a scripted Verifier, a canned analysis, candidate files."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from stitch_lsp.agents.hardware import spec_for
from stitch_lsp.models.agents import OpCost, ReferenceAnalysis, TensorMeta, Verdict
from stitch_lsp.models.findings import Finding, Severity

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(16, 1024)]


def get_init_inputs():
    return [1024]
"""

_VERDICT = re.compile(r"# VERDICT (\w+)(?: ([\d.]+))?(?: LINE (\d+))?(?: MSG (.*))?")


def candidate(verdict: str, *, kernels: int = 1, extra: str = "") -> str:
    """A candidate file whose marker comment tells FakeVerifier what to answer."""
    body = "\n".join(
        f"__global__ void k{i}(const float* __restrict__ x, float* y, int n) {{ }}"
        for i in range(kernels)
    )
    return (
        f"import torch\nfrom torch.utils.cpp_extension import load_inline\n# {verdict}\n"
        f'cuda_src = r"""\n{body}\n"""\n{extra}\n'
        "class ModelNew(torch.nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        return x\n"
    )


def reply(verdict: str, **kw: object) -> str:
    return f"Here is the file.\n\n```python\n{candidate(verdict, **kw)}```\n"


class FakeVerifier:
    """Answers from the `# VERDICT status [speedup] [LINE n] [MSG text]` marker in the code."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.profiled: list[str] = []

    def profile(
        self, reference: Path, candidate: str, *, cancel: threading.Event
    ) -> tuple[str | None, list[str]]:
        self.profiled.append(candidate)
        return "k0 5.0 us, memory-bound", ["k0: UncoalescedGlobalAccess (est. 40%): stride 32"]

    def __call__(
        self, reference: Path, candidate: str, *, compile_only: bool, cancel: threading.Event
    ) -> Verdict:
        self.calls.append((candidate, compile_only))
        m = _VERDICT.search(candidate)
        assert m, "candidate without a VERDICT marker"
        status, speed, line, msg = m.groups()
        if status == "compile_error":
            d = Finding(
                path="candidate.py",
                line=int(line or 1),
                severity=Severity.error,
                code="nvcc",
                message=msg or "expected a ';'",
            )
            return Verdict(status="compile_error", message="build failed", diagnostics=[d])
        if status == "incorrect":
            return Verdict(
                status="incorrect",
                message="outputs differ",
                correctness=msg or "max abs error 0.5 at index [0, 3]",
            )
        if status == "passed" and compile_only:
            return Verdict(status="compiled", message="built")
        if status == "passed":
            s = float(speed or 1.0)
            return Verdict(status="passed", speedup=s, eager_ms=1.0, candidate_ms=1.0 / s)
        return Verdict(status=status)  # type: ignore[arg-type]


def fake_analysis(reference: Path, settings: object, **_: object) -> ReferenceAnalysis:
    hw = spec_for("NVIDIA H200")
    return ReferenceAnalysis(
        graph_method="fx",
        inputs=[TensorMeta(shape=[16, 1024], dtype="float32")],
        outputs=[TensorMeta(shape=[16, 1024], dtype="float32")],
        ops=[
            OpCost(
                node="relu",
                op="relu",
                kind="call_function",
                flops=16384,
                bytes=131072,
                floor_ms=3e-5,
            ),
            OpCost(
                node="mul", op="mul", kind="call_function", flops=16384, bytes=131072, floor_ms=3e-5
            ),
        ],
        total_flops=32768,
        fused_bytes=131072,
        fused_floor_ms=3e-5,
        unfused_floor_ms=6e-5,
        hardware=hw,
    )
