"""Whether a file can be the reference of a generate run, decided before any model is asked.

An empty file, one without `class Model`, or one that does not parse gave the LLM nothing to
implement; it wrote something anyway, the compile-only Verifier built it, and a file appeared.
The static analysis answers in milliseconds, so the run is refused up front, with the reason.
"""

from __future__ import annotations

from pathlib import Path

from stitch_lsp.config import Settings


def reference_problem(path: Path, settings: Settings | None = None) -> str | None:
    """Why `path` is not a KernelBench-format reference (Model, get_inputs, get_init_inputs),
    or None when it is one."""
    from stitch_lsp.analysis import Document, analyze
    from stitch_lsp.files import display_path

    shown = display_path(path)
    settings = settings or Settings()
    try:
        doc = Document.from_path(path, "python", settings.max_file_bytes)
    except OSError as exc:
        return f"{shown} cannot be read: {getattr(exc, 'reason', None) or exc.strerror or exc}"
    if not doc.text.strip():
        return f"{shown} is empty: there is no Model to implement"
    analysis = analyze(doc, settings)
    if analysis.skipped:
        return f"{shown} was not analysed: {analysis.skipped}"
    errors = (d for d in analysis.diagnostics if d.severity == "error")
    broken = next((d for d in errors if d.code == "stitch.parse-error"), None)
    if broken is not None:
        return f"{shown} does not parse (line {broken.line}): {broken.message}"
    missing = []
    model = analysis.module("Model")
    if model is None or model.forward_params is None:
        missing.append("class Model(nn.Module) with a forward()")
    if analysis.get_inputs is None:
        missing.append("get_inputs()")
    if analysis.get_init_inputs is None:
        missing.append("get_init_inputs()")
    if missing:
        return f"{shown} is not a KernelBench-format reference: it has no {', no '.join(missing)}"
    return None
