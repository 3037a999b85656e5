"""Shared helpers: write a problem, generate its candidate in-process, import both."""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path
from typing import Any

from stitch_lsp.models.codegen import BuiltinCandidate


def write_problem(folder: Path, name: str, source: str) -> Path:
    path = folder / f"{name}.py"
    path.write_text(source)
    return path


def generate_for(path: Path) -> BuiltinCandidate:
    from stitch_lsp.compiler.worker.generate import generate

    return generate(path, path.name)


def import_path(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def on_gpu(ref_path: Path, tag: str) -> tuple[types.ModuleType, types.ModuleType, Any, Any]:
    """(reference module, candidate module, the model on cuda (seed 0, eval), the candidate's
    ModelNew with the model's weights) for the builtin candidate of `ref_path`; the candidate
    file is written beside the reference and its source checked for the flash kernel by the
    caller where that matters."""
    import torch

    cand = generate_for(ref_path)
    assert cand.handled, cand.reason
    cand_path = ref_path.with_name(f"{ref_path.stem}_builtin.py")
    cand_path.write_text(cand.source or "")
    ref = import_path(ref_path, f"gpu_ref_{tag}")
    new = import_path(cand_path, f"gpu_new_{tag}")
    torch.manual_seed(0)
    model = ref.Model().to("cuda").eval()
    return ref, new, model, fresh_candidate(new, model)


def fresh_candidate(new: types.ModuleType, model: Any) -> Any:
    """Another ModelNew of candidate module `new` on cuda, with `model`'s weights."""
    model_new = new.ModelNew().to("cuda").eval()
    model_new.load_state_dict(model.state_dict())
    return model_new


def serious_findings(path: Path) -> list[str]:
    """The static checks' errors and warnings on a candidate file, as `line: code message`."""
    from stitch_lsp.analysis.check import check_paths
    from stitch_lsp.config import Settings
    from stitch_lsp.models.findings import Severity

    report = check_paths([path], Settings())
    return [
        f"{d.line}: {d.code} {d.message}"
        for d in report.diagnostics
        if d.severity in (Severity.error, Severity.warning)
    ]
