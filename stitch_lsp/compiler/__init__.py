"""The builtin coder: a deterministic generator of fused CUDA for PyTorch modules.

`generate_candidate` is torch-free: capture and codegen run in the builtin worker
(`stitch_lsp.compiler.worker.main`, through the one launcher), so the language server can call
it directly.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from stitch_lsp.config import Settings
from stitch_lsp.models.codegen import (
    BuiltinCandidate,
    CandidateBatch,
    CompiledGroup,
    GenerateBatch,
    GenerateRequest,
)
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import WorkerCall, WorkerError, WorkerErrorKind, run_worker

__all__ = [
    "BuiltinCandidate",
    "CompiledGroup",
    "generate_candidate",
    "generate_candidates",
    "torch_missing",
]

GENERATE_TIMEOUT_S = 300.0


def _request(
    reference: Path, reference_header: str | None, candidate_dir: Path | None
) -> GenerateRequest:
    return GenerateRequest(
        reference=str(reference),
        candidate_dir=str(candidate_dir.resolve()) if candidate_dir else str(reference.parent),
        reference_header=reference_header,
    )


# Python's own words when torch itself (not one of its submodules) cannot be found.
_NO_TORCH = re.compile(r"No module named 'torch'")


def torch_missing(python: str | None) -> str:
    """What a user is told when the workers' Python has no torch: which Python, and how to get
    torch there. The builtin generator captures the module with torch, so it cannot work around
    it; the raw import error alone reads like a bug in stitch-lsp."""
    return (
        f"torch is not installed for the workers' Python ({python or sys.executable}: "
        "No module named 'torch'), and the builtin generator needs it: install it there "
        "(`pip install 'stitch-lsp[torch]'`, the pinned CPU wheel, or a CUDA build of torch), "
        "or point stitch.pythonForWorkers (STITCH_PYTHON_FOR_WORKERS) at a Python that has it"
    )


def _run(
    batch: GenerateBatch,
    settings: Settings,
    timeout_s: float,
    cancel: threading.Event | None = None,
    readable: tuple[Path, ...] = (),
) -> list[BuiltinCandidate]:
    """Run the torch worker on a batch; a failed worker answers every item with why."""
    call = WorkerCall(
        module=WORKER_ENTRY_POINTS["builtin"],
        request=batch,
        result=CandidateBatch,
        timeout_s=timeout_s,
        python=settings.python_for_workers,
        env={"CUDA_VISIBLE_DEVICES": ""},  # capture runs on the meta device; keep GPUs free
        label="the builtin generator",
        sandbox=settings.sandbox,
        readable=readable,
    )
    try:
        items = run_worker(call, cancel).result.items
    except WorkerError as exc:
        reason = exc.message
        if exc.kind is WorkerErrorKind.timeout:
            reason = f"the builtin generator timed out after {timeout_s:.0f} s"
        elif _NO_TORCH.search(exc.log_tail):  # it died importing torch, before any answer
            reason = torch_missing(settings.python_for_workers)
        elif exc.kind not in (WorkerErrorKind.cancelled, WorkerErrorKind.cannot_start):
            tail = [ln for ln in exc.log_tail.strip().splitlines() if ln.strip()][-5:]
            reason = f"the builtin generator's worker failed ({exc.message}): " + " | ".join(tail)
        return [BuiltinCandidate(handled=False, reason=reason) for _ in batch.items]
    # The worker answers "cannot import torch: <the ImportError>" per item: said plainly here.
    return [
        BuiltinCandidate(handled=False, reason=torch_missing(settings.python_for_workers))
        if not item.handled and _NO_TORCH.search(item.reason)
        else item
        for item in items
    ]


def generate_candidate(
    reference: Path,
    settings: Settings,
    *,
    reference_header: str | None = None,
    candidate_dir: Path | None = None,
    timeout_s: float = GENERATE_TIMEOUT_S,
    cancel: threading.Event | None = None,
) -> BuiltinCandidate:
    """Generate a KernelBench-format candidate (ModelNew) for `reference`, or say why not.

    The header names the reference relative to `candidate_dir` (default: beside the reference),
    unless `reference_header` gives it verbatim.
    """
    reference = Path(reference).resolve()
    if not reference.is_file():
        return BuiltinCandidate(handled=False, reason=f"no such file: {reference}")
    batch = GenerateBatch(items=[_request(reference, reference_header, candidate_dir)])
    return _run(batch, settings, timeout_s, cancel)[0]


def generate_candidates(
    references: Sequence[Path],
    settings: Settings,
    *,
    candidate_dir: Path | None = None,
    timeout_s: float = GENERATE_TIMEOUT_S,
    cancel: threading.Event | None = None,
    readable: tuple[Path, ...] = (),
) -> list[BuiltinCandidate]:
    """Like `generate_candidate` for many references, in one worker (one `import torch`).
    `readable`: files the references load by path (a subproblem's original reference)."""
    refs = [Path(r).resolve() for r in references]
    if not refs:
        return []
    batch = GenerateBatch(items=[_request(r, None, candidate_dir) for r in refs])
    return _run(batch, settings, timeout_s * len(refs), cancel, readable)
