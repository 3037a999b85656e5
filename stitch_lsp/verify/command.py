"""`stitch-lsp verify REFERENCE.py CANDIDATE.py`: the Verifier without an editor."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "verify",
        help="build, check, time and police a candidate (ModelNew) against its reference (Model)",
    )
    p.add_argument("reference", help="file with Model, get_inputs, get_init_inputs")
    p.add_argument("candidate", help="file with ModelNew (may be the reference file itself)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--trials", type=int, default=None, help="correctness trials (default 5)")
    p.add_argument("--device", default=None, help="cuda:K (default: the first visible GPU)")
    p.add_argument(
        "--timeout", type=float, default=None, help="seconds before the worker is killed"
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

    from stitch_lsp.config import Settings
    from stitch_lsp.verify import verify
    from stitch_lsp.verify.report import render

    settings = Settings.from_sources(trials=args.trials)
    result = verify(
        Path(args.reference),
        Path(args.candidate),
        settings,
        device=args.device,
        compile_only=args.compile_only,
        timeout_s=args.timeout,
        compare_compile=not args.no_compile,
        extra_baselines=args.extra_baselines,
    )
    if args.json:
        print(result.model_dump_json(indent=2))
    else:
        print(render(result))
    return 0 if result.ok else 1
