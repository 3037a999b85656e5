"""Nsight Compute in the editor: `ncu` diagnostics, hovers and code lenses from a profile.

Results are kept per document and per content hash. The `ncu` diagnostic source returns the
findings mapped onto exactly the text being shown, so an edit hides them at once (they described
other code), and undoing back to the profiled text brings them back without a new run. Hovers
and lenses keep showing the last profile after an edit, marked as stale.

Commands:
- `stitch.profile` [uri | {uri, full}]: profile the file on the GPU (a scheduler job: one per
  GPU, superseded by a newer request, cancelled when the document changes, cached by content).
- `stitch.showProfile` [{uri, report, map, side}] or [uri, report]: load an existing `.ncu-rep`
  and show it on the workspace's files. No GPU needed; it runs no user code. With
  `side: "reference"` the report is of the reference's `Model`: its kernels go beside the
  candidate's in the results panel of `uri` (the roofline and the kernel table), and nowhere else.

The "Profile with Nsight Compute" lens and code actions are offered only where a profile can run
(`profiler_problem`: a GPU, and ncu on PATH or at stitch.ncuPath); the command itself says why
not.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from stitch_lsp.analysis.document import uri_to_path
from stitch_lsp.analysis.model import KernelInfo, LaunchInfo, ModuleInfo
from stitch_lsp.files import unreadable_reason
from stitch_lsp.models.commands import (
    CommandResult,
    ProfileArgs,
    ProfileCommandResult,
    ShowProfileArgs,
)
from stitch_lsp.models.findings import Finding
from stitch_lsp.models.profile import (
    ProfileReport,
    ProfileRequest,
    ProfileResult,
    ProfileRun,
    ReportRequest,
)
from stitch_lsp.server.documents import text_hash
from stitch_lsp.server.features.common import (
    AfterSave,
    VerifiedSpeedups,
    arguments,
    lens,
    read_disk_text,
    unsaved,
)
from stitch_lsp.server.features.results import (
    profile_reference,
    remember_profile,
    remember_reference_profile,
)

if TYPE_CHECKING:
    from stitch_lsp.profile.pipeline import MappedReport
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument
    from stitch_lsp.server.jobs import JobContext

SOURCE = "ncu"
PROFILE = "stitch.profile"
SHOW = "stitch.showProfile"
PROFILE_TITLE = "Profile with Nsight Compute"
_KEEP_PER_DOC = 8  # profiles remembered per document (distinct contents)
_SUFFIXES = (".py", ".cu")


@dataclass
class DocProfile:
    """A profile mapped onto one document's text."""

    text_hash: str
    report_path: str
    findings: list[Finding]
    kernels: list[tuple[ProfileResult, int]]  # kernel, 1-based signature line in this text
    speedup: float | None = None


@dataclass
class ProfileStore:
    """Profiles per document and content hash (`server.store(ProfileStore)`).

    The hover and lenses show a speedup the Verifier measured on the same text
    (`VerifiedSpeedups`) beside the profile.
    """

    by_uri: dict[str, OrderedDict[str, DocProfile]] = field(default_factory=dict)

    def put(self, uri: str, prof: DocProfile) -> None:
        per = self.by_uri.setdefault(uri, OrderedDict())
        per[prof.text_hash] = prof
        per.move_to_end(prof.text_hash)
        while len(per) > _KEEP_PER_DOC:
            per.popitem(last=False)

    def fresh(self, uri: str, text: str) -> DocProfile | None:
        per = self.by_uri.get(uri)
        return per.get(text_hash(text)) if per else None

    def latest(self, uri: str) -> DocProfile | None:
        per = self.by_uri.get(uri)
        return next(reversed(per.values())) if per else None


def register(server: StitchServer) -> None:
    store = server.store(ProfileStore)
    verified = server.store(VerifiedSpeedups)
    after_save = AfterSave(server)

    def speedup_of(doc: OpenDocument, prof: DocProfile) -> float | None:
        found = verified.get(doc.uri, doc.text)
        return found if found is not None else prof.speedup

    def diagnostics(doc: OpenDocument) -> list[Finding]:
        prof = store.fresh(doc.uri, doc.text)
        return list(prof.findings) if prof else []

    def hover(doc: OpenDocument, pos: lsp.Position) -> str | None:
        prof, stale = _profile_for(store, doc)
        if prof is None or doc.analysis is None:
            return None
        from stitch_lsp.analysis import symbol_at
        from stitch_lsp.profile.summary import hover_markdown

        target = symbol_at(doc.analysis, pos.line, pos.character)
        if isinstance(target, (KernelInfo, LaunchInfo)):
            name = target.name if isinstance(target, KernelInfo) else target.kernel
            k = _kernel(prof, name)
            return hover_markdown(k, speedup_of(doc, prof), stale) if k else None
        if isinstance(target, ModuleInfo) and prof.kernels:
            return _module_markdown(prof, stale, speedup_of(doc, prof))
        return None

    def lenses(doc: OpenDocument) -> list[lsp.CodeLens]:
        prof, stale = _profile_for(store, doc)
        if prof is None:
            # Nothing measured yet: offer the run where it applies, and where it can run.
            if profiler_problem(server) is not None:
                return []
            return [lens(row, PROFILE_TITLE, PROFILE, [doc.uri]) for row in _run_rows(doc)]
        from stitch_lsp.profile.summary import lens_title

        out: list[lsp.CodeLens] = []
        analysis = doc.analysis
        where = {k.name: k.selection_range[0] for k in (analysis.kernels if analysis else [])}
        for k, line in prof.kernels:
            row = where.get(k.name, line - 1)
            title = lens_title(k, speedup_of(doc, prof))
            title += " (stale: file changed)" if stale else ""
            out.append(lens(row, title, PROFILE, [doc.uri]))
        for m in analysis.modules if analysis else []:
            if m.name in ("ModelNew", "Model") and m.name == _profiled_class(analysis):
                total = sum(k.duration_ns or 0.0 for k, _ in prof.kernels) / 1000
                slow = max(prof.kernels, key=lambda kl: kl[0].duration_ns or 0.0)[0]
                title = (
                    f"ncu: {len(prof.kernels)} kernel(s), {total:.1f} µs on the GPU; "
                    f"slowest {slow.name} ({slow.bottleneck.value}-bound)"
                ) + (" (stale)" if stale else "")
                out.append(lens(m.selection_range[0], title, PROFILE, [doc.uri]))
        return out

    def actions(doc: OpenDocument, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        if not _run_rows(doc) or profiler_problem(server) is not None:
            return []
        return [
            lsp.CodeAction(
                title=title,
                kind=lsp.CodeActionKind.Source,
                command=lsp.Command(title=title, command=PROFILE, arguments=[arg]),
            )
            for title, arg in (
                (PROFILE_TITLE, doc.uri),
                (f"{PROFILE_TITLE} (--set full)", {"uri": doc.uri, "full": True}),
            )
        ]

    async def show_profile(ls: StitchServer, *args: Any) -> CommandResult:
        a = arguments(ShowProfileArgs, args, SHOW)
        run = await _read_report(ls, a.uri, a.report)
        if not run.ok or run.report is None:
            ls.window_show_message(
                lsp.ShowMessageParams(type=lsp.MessageType.Error, message=f"ncu: {run.error}")
            )
            return CommandResult(ok=False, message=run.error or "the report could not be read")
        if a.side == "reference":
            if a.uri is None or ls.documents.get(a.uri) is None:
                return CommandResult(
                    ok=False, message="a reference's report needs the open candidate"
                )
            remember_reference_profile(ls, a.uri, run)
            return ProfileCommandResult(ok=True, report=run.report.report_path)
        if a.uri is not None and (doc := ls.documents.get(a.uri)) is not None:
            remember_profile(ls, a.uri, doc.text, run)  # the results panel of the file it was for
        return await apply_report(ls, store, run.report, a.uri, a.map)

    async def profile(ls: StitchServer, *args: Any) -> CommandResult:
        a = arguments(ProfileArgs, args, PROFILE)
        return await start_profile(ls, store, a.uri, full=a.full)

    async def on_save(doc: OpenDocument) -> None:
        if not server.settings.profile_on_save or not _profilable(doc):
            return
        after_save.schedule(
            doc, lambda: start_profile(server, store, doc.uri, full=False, quiet=True)
        )

    server.register_diagnostic_source(SOURCE, diagnostics)
    server.register_hover_provider("profile", hover)
    server.register_code_lens_provider("profile", lenses)
    server.register_code_action_provider("profile", actions)
    server.register_command(SHOW, show_profile, executes_code=False)
    server.register_command(PROFILE, profile, executes_code=True)
    server.save_listeners.append(on_save)


# ---- applying a report ------------------------------------------------------------------------


async def apply_report(
    ls: StitchServer,
    store: ProfileStore,
    report: ProfileReport,
    origin_uri: str | None,
    maps: dict[str, str] | None = None,
    speedup: float | None = None,
) -> ProfileCommandResult:
    """Map a report onto open documents and workspace files; store and publish the findings.

    The mapping reads up to 500 workspace files, so it runs in a worker thread, over a bounded
    walk of the workspace only; storing and publishing happen back on the loop."""
    open_docs = {
        str(d.path.resolve()): d for d in list(ls.documents.values()) if d.path is not None
    }
    texts = {p: d.text for p, d in open_docs.items()}
    origin = uri_to_path(origin_uri) if origin_uri else None
    mapped, mapped_texts = await asyncio.get_running_loop().run_in_executor(
        ls.analysis_executor,
        _map_in_thread,
        report,
        texts,
        origin,
        maps or {},
        ls.workspace_roots(),
    )
    per_path = mapped.findings_by_path()
    kernels_at: dict[str, list[tuple[ProfileResult, int]]] = {}
    for k in mapped.kernels:
        if k.place is not None and k.representative:
            kernels_at.setdefault(str(k.place.path.resolve()), []).append((k.kernel, k.place.line))
    touched: list[str] = []
    for path in set(per_path) | set(kernels_at):
        doc = ls.documents.get(open_docs[path].uri) if path in open_docs else None
        text = mapped_texts.get(path)  # the text it was mapped on: an edit since makes it stale
        if text is None:
            continue
        uri = doc.uri if doc is not None else Path(path).as_uri()
        store.put(
            uri,
            DocProfile(
                text_hash(text),
                report.report_path,
                per_path.get(path, []),
                kernels_at.get(path, []),
                speedup,
            ),
        )
        touched.append(uri)
        if doc is not None:
            ls.schedule_publish(uri, delay_ms=0)
    return ProfileCommandResult(
        ok=True,
        report=report.report_path,
        documents=sorted(touched),
        diagnostics=len(mapped.findings),
        kernels=[k.summary for k in mapped.kernels],
        unmapped=mapped.unmapped,
    )


def _map_in_thread(
    report: ProfileReport,
    open_texts: dict[str, str],
    origin: Path | None,
    maps: dict[str, str],
    workspace: list[Path],
) -> tuple[MappedReport, dict[str, str]]:
    """The mapping, and the text of each file it placed something on (thread-safe: it only
    reads files). The report's own folder is searched only inside the workspace: a report
    opened from `/` walked and sorted the whole disk (13 s); outside, the origin file alone."""
    from stitch_lsp.profile.pipeline import map_report, source_mapper

    roots: list[Path] = [Path(p) for p in open_texts]
    if origin is not None:
        inside = any(_within(origin, folder) for folder in workspace)
        roots.append(origin.parent if inside else origin)
    texts = {Path(p): t for p, t in open_texts.items()}
    mapper = source_mapper(report, roots, maps=maps, texts=texts, preferred=origin, limit=500)
    mapped = map_report(report, mapper, origin)
    placed = set(mapped.findings_by_path())
    placed |= {str(k.place.path.resolve()) for k in mapped.kernels if k.place is not None}
    mapped_texts = {}
    for path in placed:
        text = open_texts.get(path)
        if text is None:
            text = mapper.text_of(Path(path))
        if text is not None:
            mapped_texts[path] = text
    return mapped, mapped_texts


def _within(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except (ValueError, OSError, RuntimeError):
        return False
    return True


async def _run_worker(
    ls: StitchServer, ctx: JobContext, request: ProfileRequest | ReportRequest
) -> ProfileRun:
    """The profile worker (ncu, or a report read) through the scheduler's launcher."""
    from stitch_lsp.models.profile import ProfileErrorKind
    from stitch_lsp.profile.client import profile_call
    from stitch_lsp.workers.launch import WorkerError, WorkerErrorKind

    gpu = ctx.device if ctx.device and ctx.device.startswith("cuda:") else None
    call = profile_call(
        request,
        timeout_s=ls.settings.verify_timeout_s + 60,
        sandbox=ls.settings.sandbox,
        device=gpu,
    )
    try:
        return (await ctx.run_worker(call)).result
    except WorkerError as exc:
        if exc.kind is WorkerErrorKind.timeout:
            return ProfileRun(ok=False, error_kind=ProfileErrorKind.timeout, error=exc.message)
        tail = exc.log_tail.strip()
        return ProfileRun(
            ok=False,
            error_kind=ProfileErrorKind.failed,
            error=f"{exc.message}: {tail[-500:]}" if tail else exc.message,
            log_tail=tail[-2000:],
        )


async def _read_report(ls: StitchServer, uri: str | None, report_path: str) -> ProfileRun:
    from stitch_lsp.server.jobs import JobSpec

    async def run(ctx: JobContext) -> ProfileRun:
        ctx.report(f"reading {Path(report_path).name}")
        return await _run_worker(
            ls, ctx, ReportRequest(report=report_path, ncu_path=ls.settings.ncu_path)
        )

    spec = JobSpec(
        kind="profile-read",
        run=run,
        uri=uri,
        needs_gpu=False,
        cancel_on_change=False,
        title=f"ncu: reading {Path(report_path).name}",
        summarize=lambda r: (
            f"ncu report: {len(r.report.kernels) if r.report else 0} kernel(s)",
            None,
        ),
    )
    outcome = await ls.jobs.run(spec)
    if isinstance(outcome.result, ProfileRun):
        return outcome.result
    from stitch_lsp.models.profile import ProfileErrorKind

    return ProfileRun(ok=False, error_kind=ProfileErrorKind.failed, error=outcome.message)


async def start_profile(
    ls: StitchServer, store: ProfileStore, uri: str, *, full: bool, quiet: bool = False
) -> CommandResult:
    """Queue a GPU profile of a document and show its findings when it finishes."""
    from stitch_lsp.server.jobs import JobSpec, JobState, content_key

    doc = ls.documents.get(uri)
    path = uri_to_path(uri)
    if path is None or path.suffix not in _SUFFIXES:
        return CommandResult(ok=False, message="only .py and .cu files can be profiled")
    try:
        text = doc.text if doc is not None else await read_disk_text(ls, path)
    except OSError as exc:
        return _refuse(ls, f"cannot profile: {unreadable_reason(exc)}", quiet)
    s = ls.settings
    reference = profile_reference(doc, path)
    req = ProfileRequest(
        path=str(path),
        sections=list(s.ncu_sections),
        full_set=full or s.ncu_full_set,
        ncu_path=s.ncu_path,
        python=s.python_for_workers,
        timeout_s=s.verify_timeout_s,
        reference=str(reference) if reference is not None else None,
    )
    ref_text = ""
    if reference is not None and reference != path:
        try:
            ref_text = await read_disk_text(ls, reference)
        except OSError as exc:
            return _refuse(ls, f"cannot profile its reference: {unreadable_reason(exc)}", quiet)
    if doc is not None and doc.version is not None and await unsaved(ls, doc, path):
        message = "save the file first: the profiler runs what is on disk"
        return CommandResult(ok=False, message=message)

    async def run(ctx: JobContext) -> ProfileRun:
        ctx.report("building and running under Nsight Compute")
        return await _run_worker(ls, ctx, req)

    spec = JobSpec(
        kind="profile",
        run=run,
        uri=uri,
        version=doc.version if doc is not None else None,
        cache_key=content_key(
            text + "\0" + ref_text,
            "profile",
            req.model_dump(include={"sections", "full_set", "ncu_path", "reference"}),
        ),
        title=f"ncu: profiling {path.name}",
        summarize=_summarize_run,
    )
    outcome = await ls.jobs.run(spec)
    result = outcome.result
    if outcome.state in (JobState.done, JobState.cached) and isinstance(result, ProfileRun):
        if result.ok and result.report is not None:
            remember_profile(ls, uri, text, result)
            summary = await apply_report(ls, store, result.report, uri)
            summary.cached = outcome.state is JobState.cached
            summary.wall_seconds = result.wall_s
            summary.ncu_seconds = result.ncu_s
            summary.build_seconds = result.build_s
            return summary
        message = result.error or "profile failed"
    else:
        message = outcome.message or outcome.state.value
    if outcome.state is JobState.cancelled:
        pass  # superseded or the document changed: the newer run speaks for itself
    elif quiet:  # profile-on-save: a log line, not a pop-up on every save
        ls.log(f"ncu: {message}", lsp.MessageType.Warning)
    else:
        ls.window_show_message(
            lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"ncu: {message}")
        )
    return CommandResult(ok=False, message=message, state=outcome.state.value)


def _refuse(ls: StitchServer, message: str, quiet: bool) -> CommandResult:
    """A file the profiler cannot take: said once (a log line for profile-on-save), answered."""
    kind = lsp.MessageType.Warning
    if quiet:
        ls.log(f"ncu: {message}", kind)
    else:
        ls.window_show_message(lsp.ShowMessageParams(type=kind, message=f"ncu: {message}"))
    return CommandResult(ok=False, message=message)


def _summarize_run(run: Any) -> tuple[str, float | None]:
    if isinstance(run, ProfileRun) and run.ok and run.report is not None:
        n = len(run.report.kernels)
        return f"ncu: {n} kernel(s) profiled in {run.wall_s:.1f} s", None
    return f"ncu: {getattr(run, 'error', 'failed')}", None


def _profile_for(store: ProfileStore, doc: OpenDocument) -> tuple[DocProfile | None, bool]:
    prof = store.fresh(doc.uri, doc.text)
    if prof is not None:
        return prof, False
    latest = store.latest(doc.uri)
    return latest, latest is not None


def _kernel(prof: DocProfile, name: str) -> ProfileResult | None:
    return next((k for k, _ in prof.kernels if k.name == name), None)


def _module_markdown(prof: DocProfile, stale: bool, speedup: float | None) -> str:
    from stitch_lsp.profile.summary import hover_markdown, lens_title

    total = sum(k.duration_ns or 0.0 for k, _ in prof.kernels) / 1000
    lines = [f"### ncu · {len(prof.kernels)} kernel(s), {total:.1f} µs on the GPU"]
    if speedup is not None:
        lines.append(f"**{speedup:.2f}x** vs eager (verified)")
    lines += [f"- `{k.name}`: {lens_title(k).removeprefix('ncu: ')}" for k, _ in prof.kernels]
    slowest = max(prof.kernels, key=lambda kl: kl[0].duration_ns or 0.0)[0]
    return "\n".join(lines) + "\n\n" + hover_markdown(slowest, None, stale)


def profiler_problem(server: StitchServer) -> str | None:
    """Why no profile can run here (no GPU; no ncu), or None. A cluster's nodes have their own
    ncu: only the GPUs count then."""
    if not server.jobs.devices:
        return server.jobs.unavailable or "no CUDA GPU here"
    if server.cluster.connected:
        return None
    ncu = server.settings.ncu_path
    if _find_program(ncu, os.environ.get("PATH", "")) is None:
        return f"ncu not found ({ncu}): install Nsight Compute or set stitch.ncuPath"
    return None


_found: dict[tuple[str, str], str | None] = {}


def _find_program(name: str, path: str) -> str | None:
    """`shutil.which`, remembered per name and PATH: lenses ask on every request."""
    key = (name, path)
    if key not in _found:
        _found[key] = shutil.which(os.path.expanduser(name), path=path)
    return _found[key]


def _profiled_class(analysis: Any) -> str | None:
    names = {m.name for m in analysis.modules}
    return "ModelNew" if "ModelNew" in names else ("Model" if "Model" in names else None)


def _run_rows(doc: OpenDocument) -> list[int]:
    """0-based lines for a "profile" lens: the profiled class of a .py file, or the kernels of
    a .cu file that has main(); none for files the profiler cannot run."""
    path = doc.path
    a = doc.analysis
    if path is None or a is None or path.suffix not in _SUFFIXES:
        return []
    if path.suffix == ".py":
        name = _profiled_class(a)
        mod = a.module(name) if name else None
        ok = mod is not None and a.get_inputs is not None and a.get_init_inputs is not None
        return [mod.selection_range[0]] if ok and mod is not None else []
    if not re.search(r"\bmain\s*\(", doc.text):
        return []
    return [k.selection_range[0] for k in a.kernels if k.kind == "kernel"]


def _profilable(doc: OpenDocument) -> bool:
    path = doc.path
    if path is None or path.suffix not in _SUFFIXES:
        return False
    a = doc.analysis
    return a is not None and bool(a.kernels or a.is_candidate)
