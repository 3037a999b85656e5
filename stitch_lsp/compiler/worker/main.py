"""The builtin coder's worker (`stitch_lsp.compiler.worker.main`): a `GenerateBatch` in, a
`CandidateBatch` out.

Capture runs on the meta device, so the worker needs torch but no GPU.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path

from stitch_lsp.models.codegen import (
    BuiltinCandidate,
    CandidateBatch,
    GenerateBatch,
    GenerateRequest,
)
from stitch_lsp.workers.entry import read_request


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    batch, out = read_request(args, GenerateBatch, "stitch_lsp.compiler.worker.main")
    out.save(CandidateBatch(items=[handle(r) for r in batch.items]))
    return 0


def handle(request: GenerateRequest) -> BuiltinCandidate:
    try:
        from stitch_lsp.compiler.worker.generate import generate, header_for

        reference = Path(request.reference)
        header = request.reference_header or header_for(
            reference, Path(request.candidate_dir) if request.candidate_dir else None
        )
        return generate(reference, header)
    except ImportError as exc:
        return BuiltinCandidate(handled=False, reason=f"the worker cannot import torch: {exc}")
    except Exception as exc:  # a bug here must become a clear answer, not a dead worker
        tb = traceback.format_exc(limit=6)
        return BuiltinCandidate(
            handled=False, reason=f"builtin coder failed: {type(exc).__name__}: {exc}\n{tb}"
        )
