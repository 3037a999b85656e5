"""`stitch-lsp verify REFERENCE.py CANDIDATE.py`: the Verifier without an editor."""

from __future__ import annotations

import argparse
from pathlib import Path

from stitch_lsp.cli.contract import UsageError, add_format, int_range, positive_float

# What each file must be, said when another kind of file is given (a .cu, a notebook...).
_WANTS = {
    "reference": "a Python file that defines Model, get_inputs and get_init_inputs",
    "candidate": "a Python file that defines ModelNew (its CUDA built with load_inline, "
    "torch.utils.cpp_extension.load or stitch_lsp.runtime)",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="build, check, time and police a candidate (ModelNew) against its reference (Model)",
    )
    p.add_argument("reference", help="file with Model, get_inputs, get_init_inputs")
    p.add_argument("candidate", help="file with ModelNew (may be the reference file itself)")
    add_format(p)
    p.add_argument(
        "--trials", type=int_range(1, 100), default=None, help="correctness trials (default 5)"
    )
    p.add_argument("--device", default=None, help="cuda:K (default: the first visible GPU)")
    p.add_argument(
        "--timeout", type=positive_float, default=None, help="seconds before the worker is killed"
    )
    p.add_argument("--compile-only", action="store_true", help="build only, even with a GPU")
    p.add_argument("--no-compile", action="store_true", help="do not time torch.compile")
    p.add_argument(
        "--extra-baselines",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also time the reference under a CUDA graph and torch.compile reduce-overhead "
        "(default: the extraBaselines setting, off)",
    )
    p.set_defaults(func=_run)


def python_file(path: Path, what: str) -> Path:
    """`path` when it is a Python file; else a UsageError saying what it must be. The worker
    imports both files, so a .cu file would only fail there, with a traceback."""
    from stitch_lsp.files import display_path

    if path.suffix != ".py":
        kind = f"a {path.suffix} file" if path.suffix else "not a .py file"
        raise UsageError(f"{what} {display_path(path)} is {kind}; a {what} must be {_WANTS[what]}")
    return path


def _run(args: argparse.Namespace) -> int:
    from stitch_lsp.cli.contract import emit_json, input_file, load_settings
    from stitch_lsp.verify import verify
    from stitch_lsp.verify.progress_lines import ProgressLines
    from stitch_lsp.verify.report import render

    reference = python_file(input_file(Path(args.reference), "reference"), "reference")
    candidate = python_file(input_file(Path(args.candidate), "candidate"), "candidate")
    settings = load_settings(trials=args.trials)

    # Stages go to stderr as they happen, so stdout keeps only the result.
    with ProgressLines() as lines:
        result = verify(
            reference,
            candidate,
            settings,
            device=args.device,
            compile_only=args.compile_only,
            timeout_s=args.timeout,
            compare_compile=not args.no_compile,
            extra_baselines=args.extra_baselines,
            progress=lines.stage,
        )
    if args.format == "json":
        data = result.model_dump(mode="json")
        if not result.ok:
            data["error"] = f"{result.status.value}: {result.message}"
        emit_json(data)
    else:
        print(render(result))
    return 0 if result.ok else 1
