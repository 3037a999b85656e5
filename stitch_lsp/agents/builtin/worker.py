"""Torch-side entry point: `python -m stitch_lsp.agents.builtin.worker REQUEST.json RESPONSE.json`.

Reads a GenerateRequest, writes a BuiltinCandidate. Capture runs on the meta device, so the
worker needs torch but no GPU.
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


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m stitch_lsp.agents.builtin.worker REQUEST.json RESPONSE.json")
        return 2
    text = Path(argv[0]).read_text()
    out = Path(argv[1])
    if '"items"' in text[:20]:
        batch = GenerateBatch.model_validate_json(text)
        results = CandidateBatch(items=[handle(r) for r in batch.items])
        out.write_text(results.model_dump_json())
        return 0
    out.write_text(handle(GenerateRequest.model_validate_json(text)).model_dump_json())
    return 0


def handle(request: GenerateRequest) -> BuiltinCandidate:
    try:
        from stitch_lsp.agents.builtin.generate import generate, header_for

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


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
