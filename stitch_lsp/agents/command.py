"""`stitch-lsp generate` (the agent loop from a terminal) and `stitch-lsp export-trajectories`."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stitch_lsp.models.agents import Attempt, RunResult

from stitch_lsp.cli.contract import add_format, int_range, positive_float


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate",
        help="plan, write and verify a fused CUDA implementation of a KernelBench-format module",
        description="Runs Planner -> Coder -> Verifier until an attempt is correct and fast enough "
        "or the attempts run out; writes the best attempt to a new file next to the reference.",
    )
    p.add_argument(
        "reference", type=Path, help="a file defining Model, get_inputs, get_init_inputs"
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        help="where to write (must not exist); "
        "default: <stem>_stitch.py, <stem>_stitch_2.py, ... next to the reference",
    )
    p.add_argument(
        "--coder", choices=("auto", "llm", "builtin"), help="default: the settings' coder"
    )
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://localhost:8000/v1")
    p.add_argument("--model", help="model name sent to the endpoint")
    p.add_argument("--api-key-env", help="environment variable holding the API key")
    p.add_argument(
        "--max-attempts", type=int_range(1, 50), help="attempt budget, 1 to 50 (default 5)"
    )
    p.add_argument(
        "--target-speedup", type=positive_float, help="stop once this speedup is reached"
    )
    p.add_argument(
        "--verify",
        choices=("auto", "full", "compile"),
        default="auto",
        help="auto (the default): full where a CUDA GPU is visible, else compile (and it says "
        "so); full: GPU correctness and timing; compile: build + static checks only",
    )
    p.add_argument("--device", help="cuda:K to verify on")
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="plan, generate and verify on a Ray cluster (ray://head:10001, or head:6379 inside "
        "the cluster); without ADDRESS a local Ray is started for the run",
    )
    p.add_argument(
        "--no-seed",
        action="store_true",
        help="do not show the LLM the builtin generator's draft as a starting point",
    )
    p.add_argument(
        "--single-shot",
        action="store_true",
        help="write the whole program in one piece even when the plan has several fusion groups "
        "(default with the LLM coder: one subtask per group, then the stitched whole)",
    )
    p.add_argument(
        "--trajectories-dir", help="where attempt records go (relative: to the reference)"
    )
    p.add_argument(
        "--standalone",
        action="store_true",
        help="write the result as a torch load_inline file that needs no stitch-lsp (its "
        "runtime helpers inlined; it builds slower: torch's headers are compiled)",
    )
    add_format(p)
    p.set_defaults(func=_generate)

    e = sub.add_parser("export-trajectories", help="collect attempt records into one JSONL file")
    e.add_argument(
        "dir",
        nargs="?",
        type=Path,
        default=None,
        help="folder of *.jsonl records, read recursively (default: every trajectoriesDir "
        "folder, .stitch/trajectories, here and below, such as the one a generate run writes "
        "beside its reference)",
    )
    e.add_argument("-o", "--output", type=Path, help="output file (default: stdout)")
    e.add_argument("--min-reward", type=float, help="keep records with reward >= R")
    e.add_argument(
        "--only-correct", action="store_true", help="keep records verified correct on a GPU"
    )
    e.add_argument("--force", action="store_true", help="replace OUTPUT if it exists")
    e.set_defaults(func=_export)


def _generate(args: argparse.Namespace) -> int:
    with contextlib.ExitStack() as stack:
        return _generate_in(args, stack)


def _generate_in(args: argparse.Namespace, stack: contextlib.ExitStack) -> int:
    from rich.markup import escape

    from stitch_lsp.agents.loop_factory import build_loop, coder_kind, trajectories_folder
    from stitch_lsp.agents.reference_check import reference_problem
    from stitch_lsp.candidate_files import (
        HeaderError,
        free_name,
        header_line,
        with_header,
        write_new,
    )
    from stitch_lsp.cli.contract import (
        UsageError,
        console,
        emit_json,
        input_file,
        load_settings,
        output_file,
        writable_folder,
    )
    from stitch_lsp.files import display_path
    from stitch_lsp.workers.devices import discover_gpus, no_gpu_message

    as_json = args.format == "json"
    screen = console(stderr=True, highlight=False)
    reference: Path = input_file(args.reference, "reference").resolve()
    settings = load_settings(
        coder=args.coder,
        llm_base_url=args.base_url,
        llm_model=args.model,
        llm_api_key_env=args.api_key_env,
        max_attempts=args.max_attempts,
        target_speedup=args.target_speedup,
        device=args.device,
        trajectories_dir=args.trajectories_dir,
    )
    # Everything that can be wrong with the inputs and outputs is found before the run.
    if args.output is not None:
        output_file(args.output)
    else:
        output_file(free_name(reference))
    try:  # the output's first line names the reference: a name no header can carry is refused
        header_line(reference, args.output or free_name(reference))
    except HeaderError as exc:
        raise UsageError(f"{exc}; nothing was generated") from None
    kind = coder_kind(settings)
    if kind == "llm" and not settings.llm_base_url:
        raise UsageError("--coder llm needs an endpoint: --base-url or STITCH_LLM_BASE_URL")
    problem = reference_problem(reference, settings)
    if problem is not None:
        raise UsageError(f"{problem}; nothing was generated")
    writable_folder(trajectories_folder(settings, reference.parent), "trajectories")
    address = args.ray or settings.cluster
    if address:
        from stitch_lsp.cluster.use import join_for_run

        slots = join_for_run(stack, address, "stitch-lsp generate")
        if slots is None:  # it said why on stderr
            if as_json:
                emit_json({"error": f"the cluster at {address} cannot be used"})
            return 2
        gpus, no_gpu = slots, "The cluster has no GPU."
    else:
        gpus, no_gpu = discover_gpus(settings.device), no_gpu_message()
    if args.verify == "auto":
        args.verify = "full" if gpus else "compile"
        if args.verify == "compile":
            screen.print(
                f"[yellow]note:[/] {escape(no_gpu)} Verifying by compile only: "
                "correctness and speed will NOT be checked.",
                soft_wrap=True,  # one line: a flag is never split across two
            )
    compile_only = args.verify == "compile"
    if not compile_only and not gpus:
        raise UsageError(
            f"{no_gpu} Use --verify compile to build and check statically without "
            "one (correctness and speed are then not verified)."
        )

    cancel = threading.Event()
    loop = build_loop(
        reference,
        settings,
        compile_only=compile_only,
        cancel=cancel,
        progress=lambda msg: screen.print(f"[dim]… {escape(msg)}[/]"),
        device=settings.device,
        seed_with_builtin=not args.no_seed,
        stepwise=not args.single_shot,
    )
    loop.on_attempt = lambda a: screen.print(_attempt_line(a, settings.max_attempts))
    screen.print(
        f"[bold]stitch-lsp generate[/] {escape(display_path(args.reference))} · coder {kind}"
        + (escape(f" ({settings.llm_model} at {settings.llm_base_url})") if kind == "llm" else "")
        + f" · verify {args.verify}"
    )

    previous = signal.getsignal(signal.SIGINT)

    def interrupt(_sig: int, _frame: object) -> None:
        screen.print("[yellow]cancelling…[/]")
        cancel.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, interrupt)
    try:
        result = loop.run()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, previous)

    best = result.best
    if best is not None and best.code is not None and result.stopped != "cancelled":
        out = args.output or free_name(reference)
        header_text = with_header(best.code, reference, out)
        text: str | None = header_text
        if args.standalone:
            from stitch_lsp.export.standalone import ExportError, export_standalone

            try:
                text = export_standalone(header_text)
            except ExportError as exc:
                text = None
                result.message = (
                    f"{result.message}; but no standalone copy could be made ({exc}): "
                    "nothing was written"
                )
        try:
            if text is not None:
                write_new(out, text)
                result.output = str(out)
        except OSError as exc:
            result.message = (
                f"{result.message}; but {display_path(out)} could not be created "
                f"({'it appeared meanwhile' if isinstance(exc, FileExistsError) else exc}): "
                "nothing was written"
            )
    if result.subtasks:
        screen.print("[bold]subtasks[/]")
        for line in subtask_lines(result):
            screen.print(f"  {escape(line)}", soft_wrap=True)
    for note in result.notes:
        screen.print(f"[dim]note: {escape(note)}[/]", soft_wrap=True)
    colour = "green" if result.ok else "red"
    screen.print(f"[{colour}]stopped: {result.stopped} · {escape(result.message)}[/]")
    if result.output:
        screen.print(f"wrote {escape(display_path(result.output))}")
    if result.trajectory_file:
        screen.print(f"[dim]trajectories: {escape(display_path(result.trajectory_file))}[/]")
    if as_json:
        data = result.model_dump(mode="json")
        for a in data["attempts"]:
            a.pop("code", None)
        chosen = [a["verdict"] for a in data["attempts"] if best and a["index"] == best.index]
        data["diagnostics"] = chosen[0]["diagnostics"] if chosen else []
        if not result.ok:
            data["error"] = result.message
        emit_json(data)
    return 0 if result.ok else 1


def _attempt_line(a: Attempt, budget: int) -> str:
    from rich.markup import escape

    v = a.verdict
    colour = {"passed": "green", "compiled": "green", "compile_error": "red", "no_code": "red"}.get(
        v.status, "yellow"
    )
    speed = f" · {v.speedup:.2f}x" if v.speedup is not None else ""
    rub = f" · rubric {a.rubric_total}/20" if a.rubric_total is not None else ""
    reward = f" · reward {a.reward:.3f}" if a.reward is not None else ""
    detail = ""
    if v.status == "compile_error" and v.diagnostics:
        d = next((x for x in v.diagnostics if x.severity.value == "error"), v.diagnostics[0])
        detail = f" — line {d.line}: {d.message[:100]}"
    elif v.status not in {"passed", "compiled"}:
        detail = f" — {(v.correctness or v.message)[:120]}"
    coder = " · builtin" if a.coder == "builtin" and a.phase != "single" else ""
    if a.subtask is not None:
        st = a.subtask
        where = f"{st.index}/{st.total} {st.label}, attempt {st.attempt}/{st.budget}"
        head = f"attempt {a.index} [subtask {where}{coder}] [{a.stage.value}]"
    elif a.phase == "single":
        head = f"attempt {a.index}/{budget} [{a.stage.value}]"
    else:
        what = {"stitch": "stitch", "whole": "whole program"}[a.phase]
        head = f"attempt {a.index} [{what}{coder}] [{a.stage.value}]"
    return f"{escape(head)} [{colour}]{v.status}[/]{speed}{rub}{reward}{escape(detail)}"


def subtask_lines(result: RunResult) -> list[str]:
    """One line per subtask: '2/3 k2 linear+relu: done (attempts 3, 4)'."""
    words = {
        "done": "done",
        "seeded": "done by the builtin generator",
        "covered": "in the builtin generator's whole program",
        "failed": "failed, left in PyTorch",
        "stopped": "stopped by the end of the run",
        "not_reached": "not reached",
    }
    lines = []
    for o in result.subtasks:
        st = o.subtask
        tried = ""
        if o.attempts and o.status != "covered":
            tried = f" (attempt{'s' if len(o.attempts) > 1 else ''} "
            tried += ", ".join(map(str, o.attempts)) + ")"
        why = f": {o.message}" if o.status == "failed" and o.message else ""
        lines.append(f"{st.index}/{st.total} {st.group} {st.label}: {words[o.status]}{tried}{why}")
    return lines


def _export(args: argparse.Namespace) -> int:
    from stitch_lsp.agents.trajectory import iter_records, select
    from stitch_lsp.agents.trajectory_folders import trajectory_folders
    from stitch_lsp.cli.contract import UsageError, load_settings, output_file
    from stitch_lsp.files import display_path

    if args.dir is not None:
        if not args.dir.is_dir():
            raise UsageError(f"no trajectory folder at {display_path(args.dir)}")
        folders = [args.dir]
    else:
        setting = load_settings().trajectories_dir
        here = Path.cwd()
        folders = trajectory_folders(here, setting)
        if not folders:
            raise UsageError(
                f"no trajectory folder ({setting}) here or in the folders below; "
                "name the one to export (DIR)"
            )
        shown = ", ".join(
            display_path(f.relative_to(here) if f.is_relative_to(here) else f) for f in folders
        )
        print(f"reading {shown}", file=sys.stderr)
    if args.output is not None:
        if args.output.exists() and not args.force:
            raise UsageError(f"{display_path(args.output)} exists (use --force to replace it)")
        output_file(args.output, may_exist=True)
    skipped: list[str] = []
    records = select(
        (rec for folder in folders for _, rec in iter_records(folder, skipped)),
        min_reward=args.min_reward,
        only_correct=args.only_correct,
    )
    n = 0
    if args.output is None:
        for rec in records:
            sys.stdout.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    else:
        tmp = args.output.with_name(f".{args.output.name}.{os.getpid()}.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                for rec in records:
                    fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    n += 1
            tmp.replace(args.output)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise UsageError(f"cannot write {display_path(args.output)}: {exc.strerror}") from None
    for note in skipped[:20]:
        print(f"skipped {note}", file=sys.stderr)
    if len(skipped) > 20:
        print(f"skipped {len(skipped) - 20} more", file=sys.stderr)
    where = f" to {display_path(args.output)}" if args.output else ""
    print(f"exported {n} record(s){where}", file=sys.stderr)
    return 0
