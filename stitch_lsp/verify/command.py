"""`stitch-lsp verify REFERENCE.py CANDIDATE.py`: the Verifier without an editor."""

from __future__ import annotations

import argparse
import sys
import time

from stitch_lsp.command_line import add_format, int_range, positive_float


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


def _run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from stitch_lsp.command_line import emit_json, input_file, load_settings
    from stitch_lsp.verify import verify
    from stitch_lsp.verify.report import render

    reference = input_file(Path(args.reference), "reference")
    candidate = input_file(Path(args.candidate), "candidate")
    settings = load_settings(trials=args.trials)
    started = time.monotonic()

    def stage(name: str) -> None:
        # Stages go to stderr as they happen, so stdout keeps only the result.
        print(f"verify: {name} ({time.monotonic() - started:.1f} s)", file=sys.stderr, flush=True)

    result = verify(
        reference,
        candidate,
        settings,
        device=args.device,
        compile_only=args.compile_only,
        timeout_s=args.timeout,
        compare_compile=not args.no_compile,
        extra_baselines=args.extra_baselines,
        progress=stage,
    )
    if args.format == "json":
        data = result.model_dump(mode="json")
        if not result.ok:
            data["error"] = f"{result.status.value}: {result.message}"
        emit_json(data)
    else:
        print(render(result))
    return 0 if result.ok else 1
