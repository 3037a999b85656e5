"""The agent loop in the editor: "Generate fused CUDA implementation" and "Optimize with profiler
feedback", as code lenses, code actions and commands.

A run is a scheduler job (one per GPU; with no GPU it runs compile-only on the CPU and says so).
Work-done progress names the stage and can be cancelled. The result is a new file next to the
reference, created through a WorkspaceEdit that never overwrites anything (CreateFile with
overwrite and ignoreIfExists false, then one TextEdit), opened with showDocument. Its summary
(speedup, attempts, rubric) appears as a message and as a code lens on the reference.

Commands:
- `stitch.generate` [uri] or [{uri}]: run the loop on the file's KernelBench `Model`.
- `stitch.optimize` [uri] or [{uri}]: start from the file's `ModelNew` (its reference comes from
  the `# stitch-lsp: reference=` header, or the same file) and optimize it with ncu's findings.
- `stitch.openGenerated` [uri]: open a generated file (the summary lens uses it).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from stitch_lsp.analysis.document import uri_to_path
from stitch_lsp.analysis.model import Analysis, ModuleInfo, range_contains
from stitch_lsp.files import unreadable_reason
from stitch_lsp.models.commands import (
    AttemptSummary,
    CommandResult,
    GenerateCommandResult,
    OpenGeneratedResult,
)
from stitch_lsp.server.features.common import at_line, fail, lens, read_disk_text, uri_argument
from stitch_lsp.server.features.results import remember_op_lines
from stitch_lsp.server.scopes import OutsideWorkspace, generated_file_folder, output_folder

if TYPE_CHECKING:
    from stitch_lsp.models.agents import RunResult
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument
    from stitch_lsp.server.jobs import JobContext

GENERATE = "stitch.generate"
OPTIMIZE = "stitch.optimize"
OPEN = "stitch.openGenerated"
GENERATE_TITLE = "Generate fused CUDA implementation"
OPTIMIZE_TITLE = "Optimize with profiler feedback"


@dataclass
class RunSummary:
    title: str
    output_uri: str | None


class RunSummaries(dict[str, RunSummary]):
    """The last run's summary per reference uri (`<uri>#optimize` for an Optimize run)."""


def register(server: StitchServer) -> None:
    summaries = server.store(RunSummaries)

    def lenses(doc: OpenDocument) -> list[lsp.CodeLens]:
        a = _python_analysis(doc)
        if a is None:
            return []
        out: list[lsp.CodeLens] = []
        ref = _reference_module(a)
        if ref is not None:
            row = ref.selection_range[0]
            out.append(lens(row, GENERATE_TITLE, GENERATE, [doc.uri]))
            done = summaries.get(doc.uri)
            if done is not None:
                args = [done.output_uri] if done.output_uri else [doc.uri]
                out.append(lens(row, done.title, OPEN if done.output_uri else GENERATE, args))
        new = a.module("ModelNew")
        if new is not None:
            out.append(lens(new.selection_range[0], OPTIMIZE_TITLE, OPTIMIZE, [doc.uri]))
            done = summaries.get(f"{doc.uri}#optimize")
            if done is not None and done.output_uri:
                out.append(lens(new.selection_range[0], done.title, OPEN, [done.output_uri]))
        return out

    def actions(doc: OpenDocument, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        a = _python_analysis(doc)
        if a is None:
            return []
        line, char = params.range.start.line, params.range.start.character
        out: list[lsp.CodeAction] = []
        ref = _reference_module(a)
        if ref is not None and range_contains(ref.range, line, char):
            out.append(_action(GENERATE_TITLE, GENERATE, doc.uri))
        new = a.module("ModelNew")
        in_kernel = any(range_contains(k.range, line, char) for k in a.kernels)
        if new is not None and (range_contains(new.range, line, char) or in_kernel):
            out.append(_action(OPTIMIZE_TITLE, OPTIMIZE, doc.uri))
        return out

    async def generate(ls: StitchServer, *args: Any) -> CommandResult:
        return await run_generation(ls, summaries, uri_argument(args, GENERATE), optimize=False)

    async def optimize(ls: StitchServer, *args: Any) -> CommandResult:
        return await run_generation(ls, summaries, uri_argument(args, OPTIMIZE), optimize=True)

    async def open_generated(ls: StitchServer, *args: Any) -> OpenGeneratedResult:
        return OpenGeneratedResult(shown=await _show(ls, uri_argument(args, OPEN)))

    server.register_code_lens_provider("generate", lenses)
    server.register_code_action_provider("generate", actions)
    server.register_command(GENERATE, generate, executes_code=True)
    server.register_command(OPTIMIZE, optimize, executes_code=True)
    server.register_command(OPEN, open_generated, executes_code=False)


# ---- running --------------------------------------------------------------------------------


async def run_generation(
    ls: StitchServer, summaries: RunSummaries, uri: str, *, optimize: bool
) -> CommandResult:
    """Queue the loop for `uri`, then write, open and summarise its best attempt."""
    from stitch_lsp.server.jobs import JobSpec, JobState

    path = uri_to_path(uri)
    if path is None or path.suffix != ".py" or not path.is_file():
        return fail(ls, "generation works on a saved KernelBench-format .py file")
    doc = ls.documents.get(uri)
    try:
        disk = await read_disk_text(ls, path)
    except OSError as exc:
        return fail(ls, f"cannot generate from it: {unreadable_reason(exc)}")
    if doc is not None and disk != doc.text:
        return fail(ls, "save the file first: the loop reads what is on disk")
    reference, start_from, problem = _inputs(doc, path, disk, optimize)
    if reference is None:
        return fail(ls, problem or "no reference to work from")
    from stitch_lsp.agents.reference_check import reference_problem
    from stitch_lsp.candidate_header import HeaderError, check_value

    try:  # the generated file's header names it: refuse before the run, not after
        check_value(str(reference))
    except HeaderError as exc:
        return fail(ls, f"{exc}; nothing was generated")

    try:
        problem = await asyncio.get_running_loop().run_in_executor(
            ls.analysis_executor, reference_problem, reference, ls.settings
        )
    except OSError as exc:
        problem = f"the reference cannot be read: {unreadable_reason(exc)}"
    if problem is not None:  # nothing for a model to implement: refuse before any call
        return fail(ls, f"{problem}; nothing was generated")
    compile_only = not ls.jobs.devices
    if optimize and compile_only:
        return fail(ls, "Optimizing needs a CUDA GPU to measure speed; none is visible here.")
    roots = ls.workspace_roots() or [path.parent]
    root = roots[0]
    label = _relative(reference, root)
    settings = ls.settings
    try:
        trajectories = output_folder(
            "trajectoriesDir",
            settings.trajectories_dir,
            roots,
            user_level="trajectories_dir" in ls.user_level,
        )
        out_dir = generated_file_folder(reference, path, roots)
    except OutsideWorkspace as exc:
        return fail(ls, str(exc))

    async def run(ctx: JobContext) -> RunResult:
        loop = asyncio.get_running_loop()

        def progress(message: str) -> None:
            loop.call_soon_threadsafe(ctx.report, message)

        def blocking() -> RunResult:
            # Imported here, in the job's thread: the agents pull in openai, whose import took
            # 1.8 s and, on the event loop, was its longest block.
            from stitch_lsp.agents.loop_factory import build_loop

            gl = build_loop(reference, settings, compile_only=compile_only, root=root,
                            reference_label=label, cancel=ctx.cancel_event, progress=progress,
                            device=ctx.device, trajectories=trajectories)  # fmt: skip
            gl.opt.start_from = start_from
            analyze = gl.analyze

            def analyze_and_keep(*args: Any, **kwargs: Any) -> Any:
                # The plan names ops; the results panel shows the line each one is written on.
                analysis = analyze(*args, **kwargs)
                lines = {op.node: op.line for op in analysis.ops if op.line}
                loop.call_soon_threadsafe(remember_op_lines, ls, reference, lines)
                return analysis

            gl.analyze = analyze_and_keep
            return gl.run()

        return await ctx.run_blocking(blocking)

    verb = "optimizing" if optimize else "generating CUDA for"
    spec = JobSpec(
        kind="optimize" if optimize else "generate",
        run=run,
        uri=uri,
        version=doc.version if doc is not None else None,
        needs_gpu=not compile_only,
        # An edit to the reference makes the run's result describe old code: cancelled, like a
        # cancel from the editor (no more LLM calls, nothing written).
        cancel_on_change=True,
        title=f"stitch: {verb} {path.name}",
        summarize=lambda r: (r.message, r.best.verdict.speedup if r.best else None),
    )
    outcome = await ls.jobs.run(spec)
    result = outcome.result
    if outcome.state is JobState.cancelled:
        return CommandResult(ok=False, state="cancelled", message=outcome.message or "cancelled")
    if outcome.state is not JobState.done or result is None:
        return fail(ls, outcome.message or outcome.state.value, state=outcome.state.value)

    best = result.best
    output_uri: str | None = None
    if best is not None and best.code is not None and result.stopped != "cancelled":
        output_uri, problem = await _write_output(ls, reference, best.code, out_dir)
        if output_uri is None:
            return fail(ls, f"{result.message}; but the file could not be created: {problem}")
        result.output = str(uri_to_path(output_uri))
    key = f"{uri}#optimize" if optimize else uri
    title = _summary_title(result)
    summaries[key] = RunSummary(title, output_uri)
    kind = lsp.MessageType.Info if result.ok else lsp.MessageType.Warning
    ls.log(f"{spec.title}: {result.message}")  # the whole sentence; the toast has the verdict
    ls.window_show_message(lsp.ShowMessageParams(type=kind, message=toast_text(result)))
    if output_uri:
        await _show(ls, output_uri)
    await ls.refresh_code_lenses()
    return GenerateCommandResult(
        ok=result.ok,
        output=output_uri,
        message=result.message,
        verify=result.verify_mode,
        stopped=result.stopped,
        trajectories=result.trajectory_file,
        attempts=[
            AttemptSummary(
                index=a.index,
                stage=a.stage.value,
                status=a.verdict.status,
                speedup=a.verdict.speedup,
                rubric=a.rubric_total,
                reward=a.reward,
                phase=a.phase,
                subtask=(
                    f"{a.subtask.index}/{a.subtask.total} {a.subtask.label}" if a.subtask else None
                ),
            )
            for a in result.attempts
        ],
    )


def _inputs(
    doc: OpenDocument | None, path: Path, text: str, optimize: bool
) -> tuple[Path | None, str | None, str | None]:
    """(reference, start_from, problem); `text` is the file as it is on disk."""
    if not optimize:
        return path, None, None
    ref = None
    if doc is not None:
        try:
            ref = doc.reference_path()
        except Exception:
            ref = None
    if ref is None:
        a = doc.analysis if doc is not None else None
        if a is not None and a.module("Model") is not None:
            ref = path  # a KernelBench file with both Model and ModelNew is its own pair
    if ref is None:
        return None, None, "add a `# stitch-lsp: reference=<path>` header naming the reference"
    if not ref.is_file():
        return None, None, f"the reference {ref} does not exist"
    return ref, text, None


async def _write_output(
    ls: StitchServer, reference: Path, code: str, folder: Path
) -> tuple[str | None, str]:
    """Create a free-named file in `folder`; (uri, '') or (None, why)."""
    from stitch_lsp.candidate_files import free_name, with_header, write_new

    taken = {p.name for d in ls.documents.values() if (p := d.path) is not None}
    out = free_name(reference, taken, folder)
    try:
        text = with_header(code, reference, out)
    except ValueError as exc:  # HeaderError: a name no header can carry
        return None, str(exc)
    uri = out.as_uri()
    if _can_create_files(ls):
        edit = lsp.WorkspaceEdit(
            document_changes=[
                lsp.CreateFile(
                    uri=uri, options=lsp.CreateFileOptions(overwrite=False, ignore_if_exists=False)
                ),
                lsp.TextDocumentEdit(
                    text_document=lsp.OptionalVersionedTextDocumentIdentifier(
                        uri=uri, version=None
                    ),
                    edits=[lsp.TextEdit(range=at_line(0), new_text=text)],
                ),
            ]
        )
        params = lsp.ApplyWorkspaceEditParams(edit=edit, label="stitch: generated CUDA")
        try:
            res = await asyncio.wait_for(ls.workspace_apply_edit_async(params), 30)
        except Exception as exc:
            return None, f"the editor did not apply the edit ({exc})"
        if not res.applied:
            return None, res.failure_reason or "the editor refused the edit"
        return uri, ""
    try:  # a client that cannot create files: write it ourselves, exclusively
        write_new(out, text)
    except OSError as exc:
        return None, str(exc)
    return uri, ""


def _can_create_files(ls: StitchServer) -> bool:
    caps = ls.client_capabilities
    we = caps.workspace.workspace_edit if caps and caps.workspace else None
    if we is None or not we.document_changes:
        return False
    return lsp.ResourceOperationKind.Create in (we.resource_operations or [])


async def _show(ls: StitchServer, uri: str) -> bool:
    caps = ls.client_capabilities
    if not (
        caps and caps.window and caps.window.show_document and caps.window.show_document.support
    ):
        return False
    try:
        res = await asyncio.wait_for(
            ls.window_show_document_async(lsp.ShowDocumentParams(uri=uri, take_focus=True)), 10
        )
    except Exception:
        return False
    return bool(res and res.success)


TOAST_CHARS = 60
"""A notification shows about this much on one line; the rest is cut."""


def toast_text(result: RunResult) -> str:
    """The finished notification: the verdict first ("Compiled, NOT verified", "1.42x over
    eager"), then the file, within TOAST_CHARS. The whole message goes to the log and the
    results panel. A run that produced nothing says why in full."""
    best = result.best
    name = Path(result.output).name if result.output else ""
    if best is None:  # why matters more than the width: a long reason stays whole
        head = "Cancelled" if result.stopped == "cancelled" else "Failed"
        return f"{head}: {result.message}" if result.message else head
    if best.verdict.status == "compiled":
        text = "Compiled, NOT verified (no GPU)" + (f": {name}" if name else "")
    elif best.verdict.correct is False or best.verdict.status != "passed":
        text = f"{best.verdict.status.replace('_', ' ').capitalize()}: attempt {best.index}"
        text += f" → {name}" if name else ""
    else:
        text = f"Verified, {best.verdict.speedup or 0:.2f}x over eager" + (
            f": {name}" if name else ""
        )
    return text if len(text) <= TOAST_CHARS else text[: TOAST_CHARS - 1] + "…"


def _summary_title(result: RunResult) -> str:
    n = len(result.attempts)
    best = result.best
    if best is None:
        return f"stitch: no attempt accepted ({n} tried) — {result.stopped}"
    rub = f" · rubric {best.rubric_total}/20" if best.rubric_total is not None else ""
    name = Path(result.output).name if result.output else ""
    if best.verdict.status == "compiled":  # nothing was measured: no "k/n" that reads as a score
        head = f"compiled, NOT verified (no GPU) · attempt {best.index}"
    else:
        head = f"{best.verdict.speedup or 0:.2f}x over eager · attempt {best.index}/{n}"
    return f"stitch: {head}{rub}" + (f" → {name}" if name else "")


# ---- helpers --------------------------------------------------------------------------------


def _python_analysis(doc: OpenDocument) -> Analysis | None:
    if doc.path is None or doc.path.suffix != ".py" or doc.too_large:
        return None
    a = doc.analysis
    return a if a is not None and a.language == "python" else None


def _reference_module(a: Analysis) -> ModuleInfo | None:
    """The KernelBench `Model` the loop can take: it needs get_inputs and get_init_inputs."""
    if a.get_inputs is None or a.get_init_inputs is None:
        return None
    m = a.module("Model")
    return m if m is not None and m.forward_params is not None else None


def _relative(path: Path, root: Path) -> str:
    try:
        return Path(os.path.relpath(path, root)).as_posix()
    except ValueError:  # another drive on Windows
        return str(path)


def _action(title: str, command: str, uri: str) -> lsp.CodeAction:
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.Refactor,
        command=lsp.Command(title=title, command=command, arguments=[uri]),
    )
