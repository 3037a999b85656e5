"""The builtin coder: a deterministic generator of fused CUDA for PyTorch modules.

`generate_candidate` is torch-free: it runs capture and codegen in a worker subprocess
(`python -m stitch_lsp.agents.builtin.worker`), so the language server can call it directly.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from stitch_lsp.config import Settings
from stitch_lsp.models.codegen import (
    BuiltinCandidate,
    CandidateBatch,
    FusionGroup,
    GenerateBatch,
    GenerateRequest,
)

__all__ = ["BuiltinCandidate", "FusionGroup", "generate_candidate", "generate_candidates"]

GENERATE_TIMEOUT_S = 300.0
_PACKAGE_ROOT = Path(__file__).resolve().parents[3]


def _request(
    reference: Path, reference_header: str | None, candidate_dir: Path | None
) -> GenerateRequest:
    return GenerateRequest(
        reference=str(reference),
        candidate_dir=str(candidate_dir.resolve()) if candidate_dir else str(reference.parent),
        reference_header=reference_header,
    )


def _run_worker(payload: str, settings: Settings, timeout_s: float) -> tuple[str | None, str]:
    """Run the torch worker on one request (or a batch). Returns (response JSON, error)."""
    python = settings.python_for_workers or sys.executable
    env = dict(os.environ)
    env["CUDA_VISIBLE_DEVICES"] = ""  # capture runs on the meta device; keep GPUs free
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(_PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p
    )
    with tempfile.TemporaryDirectory(prefix="stitch-builtin-") as tmp:
        req_path, out_path = Path(tmp) / "request.json", Path(tmp) / "response.json"
        req_path.write_text(payload)
        cmd = [python, "-m", "stitch_lsp.agents.builtin.worker", str(req_path), str(out_path)]
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            return None, f"the builtin generator timed out after {timeout_s:.0f} s"
        except OSError as exc:
            return None, f"cannot start {python}: {exc}"
        if not out_path.is_file():
            tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
            return None, (
                f"the builtin generator's worker exited with {proc.returncode}: " + " | ".join(tail)
            )
        return out_path.read_text(), ""


def generate_candidate(
    reference: Path,
    settings: Settings,
    *,
    reference_header: str | None = None,
    candidate_dir: Path | None = None,
    timeout_s: float = GENERATE_TIMEOUT_S,
) -> BuiltinCandidate:
    """Generate a KernelBench-format candidate (ModelNew) for `reference`, or say why not.

    The header names the reference relative to `candidate_dir` (default: beside the reference),
    unless `reference_header` gives it verbatim.
    """
    reference = Path(reference).resolve()
    if not reference.is_file():
        return BuiltinCandidate(handled=False, reason=f"no such file: {reference}")
    payload = _request(reference, reference_header, candidate_dir).model_dump_json()
    text, error = _run_worker(payload, settings, timeout_s)
    if text is None:
        return BuiltinCandidate(handled=False, reason=error)
    return BuiltinCandidate.model_validate_json(text)


def generate_candidates(
    references: Sequence[Path],
    settings: Settings,
    *,
    candidate_dir: Path | None = None,
    timeout_s: float = GENERATE_TIMEOUT_S,
) -> list[BuiltinCandidate]:
    """Like `generate_candidate` for many references, in one worker (one `import torch`)."""
    refs = [Path(r).resolve() for r in references]
    if not refs:
        return []
    batch = GenerateBatch(items=[_request(r, None, candidate_dir) for r in refs])
    text, error = _run_worker(batch.model_dump_json(), settings, timeout_s * len(refs))
    if text is None:
        return [BuiltinCandidate(handled=False, reason=error) for _ in refs]
    return CandidateBatch.model_validate_json(text).items
