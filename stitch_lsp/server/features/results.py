"""The results panel's data: `stitch/results` answers everything measured for one file.

For the active file it gathers the attempt history of the generate/optimize runs on its reference
(from the trajectory records), the last verify result, the per-kernel Nsight Compute table of the
last profile, and the roofline: the GPU's memory and compute roofs from ncu's
SpeedOfLight_RooflineChart metrics, with each kernel of the candidate and of its reference as a
point. The profile job profiles the reference's `Model` as well (see `profile_reference`), so the
two can be compared on one chart. The client draws the panel; this module only collects.

It also puts a "Show results" lens on `ModelNew` (and on a `Model` that has runs), for clients
that declared the `stitch.showResults` command in `initializationOptions.clientCommands`.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

# Imported with the server, not on the first results request: building their pydantic models
# took 30 ms, on the event loop or holding the GIL from the scan's thread.
from stitch_lsp.agents.hardware import default_target, spec_for
from stitch_lsp.agents.trajectory import SCHEMA
from stitch_lsp.analysis.document import uri_to_path
from stitch_lsp.candidate_header import is_header_line
from stitch_lsp.files import (
    UnreadableFile,
    display_path,
    human_size,
    is_inside,
    kind_of,
    over_limit,
    read_regular,
    unreadable_reason,
)
from stitch_lsp.models.editor import (
    RESULTS_METHOD,
    AttemptRow,
    KernelRow,
    KernelShareView,
    PlanGroupView,
    PlanView,
    ResultsResponse,
    Roofs,
    RubricItemView,
    TimelinesView,
    TimelineView,
    VerifySummary,
)
from stitch_lsp.models.profile import ProfileReport, ProfileResult, ProfileRun
from stitch_lsp.models.verify import Timeline, TimelineReport
from stitch_lsp.profile.summary import summarize
from stitch_lsp.server.documents import path_key, text_hash

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument

SHOW_RESULTS = "stitch.showResults"
"""A client command: the lens is offered only to clients that say they have it."""
SHOW_RESULTS_TITLE = "Show results"
MAX_TRAJECTORY_FILES = 500
MAX_TRAJECTORY_FILE_BYTES = 16 << 20
MAX_TOTAL_TRAJECTORY_BYTES = 64 << 20
MAX_RECORD_BYTES = 4 << 20
MAX_SCAN_ENTRIES = 20_000
MAX_SCAN_DEPTH = 8
MAX_SKIP_NOTES = 5
MAX_ATTEMPTS = 100


# ---- stores -----------------------------------------------------------------------------------


@dataclass
class StoredProfile:
    """The last profile run of one document: every kernel of its report, and the reference's."""

    text_hash: str
    report: ProfileReport
    reference: ProfileReport | None
    reference_error: str | None


@dataclass
class TrajectoryIndex:
    """Trajectory records by file, re-read only when a file changes (lenses ask often).

    The folder is in the workspace, so it may hold anything: `scan_trajectories` bounds the
    walk and `_read_records` reads each file through `files.read_regular`. Called in a worker
    thread (`attempts_for_async`); the lock keeps two lens requests from reading one file twice.
    """

    files: dict[Path, tuple[tuple[int, int], list[dict[str, Any]]]] = field(default_factory=dict)
    skipped: dict[Path, str] = field(default_factory=dict)
    """Files not read, and why (a FIFO, /dev/zero, too large, a link out of the folder)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def records(self, folder: Path) -> list[dict[str, Any]]:
        with self.lock:
            return self._records(folder)

    def _records(self, folder: Path) -> list[dict[str, Any]]:
        found, notes = scan_trajectories(folder)
        for path, why in notes.items():
            self.skipped[path] = why
        out: list[dict[str, Any]] = []
        budget = MAX_TOTAL_TRAJECTORY_BYTES
        for path, stamp in found:
            cached = self.files.get(path)
            if cached is None or cached[0] != stamp:
                if stamp[1] > budget:
                    self.skipped[path] = (
                        f"{display_path(path)} was not read: the trajectory files before it "
                        f"already reached {human_size(MAX_TOTAL_TRAJECTORY_BYTES)}"
                    )
                    continue
                try:
                    cached = (stamp, _read_records(path, folder))
                except OSError as exc:
                    self.skipped[path] = unreadable_reason(exc)
                    self.files.pop(path, None)
                    continue
                self.files[path] = cached
                self.skipped.pop(path, None)
            budget -= stamp[1]
            out.extend(cached[1])
        return out

    def notes(self, folders: list[Path]) -> list[str]:
        """Why files under `folders` were skipped, one line each (at most a few)."""
        lines = [
            why
            for path, why in self.skipped.items()
            if any(path == f or f in path.parents for f in folders)
        ]
        more = len(lines) - MAX_SKIP_NOTES
        return lines[:MAX_SKIP_NOTES] + ([f"... and {more} more skipped"] if more > 0 else [])


def scan_trajectories(folder: Path) -> tuple[list[tuple[Path, tuple[int, int]]], dict[Path, str]]:
    """The `*.jsonl` files under `folder`, newest first, with their (mtime_ns, size), and the
    ones left out with why.

    A bounded walk: at most MAX_SCAN_ENTRIES entries, MAX_SCAN_DEPTH levels, no symlinked
    folder followed; a symlinked file only when it resolves inside `folder` to a regular file.
    Only `lstat`/`stat` here: nothing is opened, so a FIFO cannot block the walk."""
    found: list[tuple[float, Path, tuple[int, int]]] = []
    notes: dict[Path, str] = {}
    try:
        base = Path(os.path.realpath(folder))
    except OSError:
        return [], notes
    if not base.is_dir():
        return [], notes
    seen = 0
    stack: list[tuple[Path, int]] = [(base, 0)]
    while stack:
        current, depth = stack.pop()
        try:
            entries = os.scandir(current)
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > MAX_SCAN_ENTRIES:
                    notes[base] = (
                        f"{display_path(folder)} holds more than {MAX_SCAN_ENTRIES} entries; "
                        "only the first were looked at"
                    )
                    stack.clear()
                    break
                path = Path(entry.path)
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if depth + 1 < MAX_SCAN_DEPTH:
                            stack.append((path, depth + 1))
                        continue
                    if not entry.name.endswith(".jsonl"):
                        continue
                    st = _trajectory_stat(entry, base)
                except OSError as exc:
                    notes[path] = unreadable_reason(exc)
                    continue
                found.append((st.st_mtime, path, (st.st_mtime_ns, st.st_size)))
    found.sort(key=lambda f: f[0], reverse=True)
    return [(p, stamp) for _, p, stamp in found[:MAX_TRAJECTORY_FILES]], notes


def _trajectory_stat(entry: os.DirEntry[str], base: Path) -> os.stat_result:
    """The stat of a trajectory file, after its links, refusing what `read_regular` would."""
    if entry.is_symlink():
        real = os.path.realpath(entry.path)
        if not is_inside(real, [base]):
            raise UnreadableFile(
                entry.path, f"leads outside {display_path(base)} (to {display_path(real)})"
            )
    st = os.stat(entry.path)
    if not stat.S_ISREG(st.st_mode):
        raise UnreadableFile(entry.path, f"is not a regular file ({kind_of(st.st_mode)}); not read")
    if st.st_size > MAX_TRAJECTORY_FILE_BYTES:
        raise UnreadableFile(entry.path, over_limit(st.st_size, MAX_TRAJECTORY_FILE_BYTES))
    return st


def _read_records(path: Path, folder: Path) -> list[dict[str, Any]]:
    data = read_regular(path, MAX_TRAJECTORY_FILE_BYTES, inside=[folder])
    out: list[dict[str, Any]] = []
    for line in data.splitlines():
        if len(line) > MAX_RECORD_BYTES or not line.strip():
            continue  # one json.loads of a huge line would hold the GIL, and the loop, for long
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if isinstance(rec, dict) and rec.get("schema") == SCHEMA:
            out.append(rec)
    return out


@dataclass
class ResultsStore:
    profiles: dict[str, StoredProfile] = field(default_factory=dict)
    trajectories: TrajectoryIndex = field(default_factory=TrajectoryIndex)
    reference_reports: dict[str, ProfileReport] = field(default_factory=dict)
    """Per candidate uri, a report of its reference opened from disk (Show Nsight Compute
    Report for the reference side): used where the profile job's own reference run is absent."""
    op_lines: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per reference (`path_key`), the source line of each op the Planner's analysis found:
    the plan's fusion groups name ops, and the panel shows where each one is written."""


def store_of(server: StitchServer) -> ResultsStore:
    store = getattr(server, "results_store", None)
    if store is None:
        store = ResultsStore()
        server.results_store = store  # type: ignore[attr-defined]
    return store


# ---- hooks for the profile feature --------------------------------------------------------------


def profile_reference(doc: OpenDocument | None, path: Path) -> Path | None:
    """The reference whose `Model` the profile job profiles beside a candidate, or None."""
    if doc is None or path.suffix != ".py":
        return None
    try:
        a = doc.analysis
        if a is None or a.module("ModelNew") is None:
            return None
        if a.module("Model") is not None:
            return path  # a KernelBench file with both is its own pair
        ref = doc.reference_path()
    except Exception:
        return None
    return ref if ref is not None and ref.is_file() else None


def remember_profile(server: StitchServer, uri: str, text: str, run: ProfileRun) -> None:
    if run.report is None:
        return
    store_of(server).profiles[uri] = StoredProfile(
        text_hash(text), run.report, run.reference_report, run.reference_error
    )


def remember_reference_profile(server: StitchServer, uri: str, run: ProfileRun) -> None:
    """A report of the reference's `Model`, shown beside the candidate's kernels of `uri`."""
    if run.report is not None:
        store_of(server).reference_reports[uri] = run.report


def remember_op_lines(server: StitchServer, reference: Path, lines: dict[str, int]) -> None:
    if lines:
        store_of(server).op_lines[path_key(reference)] = dict(lines)


# ---- building the answer ------------------------------------------------------------------------


def _without_header(code: str) -> str:
    lines = code.strip().splitlines()
    if lines and is_header_line(lines[0]):
        lines = lines[1:]
    return "\n".join(line.rstrip() for line in lines).strip()


def _label_matches(label: str, reference: Path, roots: list[Path]) -> bool:
    target = path_key(reference)
    label_path = Path(label)
    if label_path.is_absolute():
        return path_key(label_path) == target
    if any(path_key(root / label_path) == target for root in roots):
        return True
    return len(label_path.parts) == 1 and label_path.name == reference.name


def _workspace_root(server: StitchServer) -> Path | None:
    try:
        root = server.workspace.root_path
    except Exception:
        return None
    return Path(root) if root else None


def trajectory_folders(server: StitchServer, reference: Path) -> tuple[list[Path], list[str]]:
    """The folders that may hold runs on `reference` (the setting, relative to the workspace
    and to the reference's folder), each resolved and confined like the folder runs write to;
    and a note for each one refused."""
    from stitch_lsp.server.scopes import OutsideWorkspace, output_folder

    roots = [r for r in (_workspace_root(server), reference.parent) if r is not None]
    folders: list[Path] = []
    notes: list[str] = []
    user_level = "trajectories_dir" in server.user_level
    for root in roots:
        try:
            folder = output_folder(
                "trajectoriesDir", server.settings.trajectories_dir, [root], user_level=user_level
            )
        except (OutsideWorkspace, OSError, RuntimeError) as exc:
            notes.append(f"trajectories not read: {exc}")
            continue
        if folder not in folders:
            folders.append(folder)
    return folders, list(dict.fromkeys(notes))


def attempts_for(
    server: StitchServer,
    reference: Path,
    candidate_text: str | None,
    notes: list[str] | None = None,
    plans: dict[tuple[str, int], PlanView] | None = None,
) -> list[AttemptRow]:
    """The recorded attempts on `reference`. Reads the disk: call it off the event loop
    (`attempts_for_async`). `notes`, when given, collects why files were skipped; `plans`, the
    plan of each (run, attempt) whose record holds one."""
    roots = [r for r in (_workspace_root(server), reference.parent) if r is not None]
    folders, refused = trajectory_folders(server, reference)
    label_roots = list(dict.fromkeys([*roots, *(f.parent.parent for f in folders)]))
    index = store_of(server).trajectories
    own = _without_header(candidate_text) if candidate_text is not None else None
    rows: list[AttemptRow] = []
    seen: set[tuple[str, int]] = set()
    for folder in folders:
        for rec in index.records(folder):
            meta = rec.get("metadata") or {}
            label = meta.get("reference")
            if not isinstance(label, str) or not _label_matches(label, reference, label_roots):
                continue
            key = (str(rec.get("run_id")), _int(rec.get("attempt")))
            if key in seen:
                continue
            seen.add(key)
            rows.append(_attempt_row(rec, own))
            if plans is not None:
                plan = _plan_of(rec)
                if plan is not None:
                    plans[key] = plan
    if notes is not None:
        notes.extend(refused + index.notes(folders))
    rows.sort(key=lambda r: (str(r.created or ""), r.run_id, r.attempt))
    return rows[-MAX_ATTEMPTS:]


PLAN_MARK = "Plan (revision "
"""How the Coder's prompts (`prompts/*.md`) introduce the plan, which follows as JSON."""


def _plan_of(rec: dict[str, Any]) -> PlanView | None:
    """The plan a record's attempt was written to: the JSON after PLAN_MARK in its prompt."""
    for message in rec.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        text = message.get("content")
        if not isinstance(text, str) or (at := text.find(PLAN_MARK)) < 0:
            continue
        start = text.find("{", at)
        try:
            raw, _ = json.JSONDecoder().raw_decode(text, start) if start >= 0 else (None, 0)
        except (ValueError, RecursionError):
            continue
        if not isinstance(raw, dict):
            continue
        head = text[at + len(PLAN_MARK) : start].split(")", 1)[0]
        groups = [
            PlanGroupView(
                name=str(g.get("name", "")),
                ops=[str(o) for o in g.get("ops") or []],
                rationale=str(g.get("rationale") or ""),
            )
            for g in raw.get("fusion_groups") or []
            if isinstance(g, dict)
        ]
        return PlanView(
            run_id=str(rec.get("run_id", "")),
            revision=_int(head) if head.strip().isdigit() else 0,
            summary=str(raw.get("summary") or ""),
            groups=groups,
            steps=[str(x) for x in raw.get("steps") or []],
            risks=[str(x) for x in raw.get("correctness_risks") or []],
        )
    return None


def plan_for(
    rows: list[AttemptRow], plans: dict[tuple[str, int], PlanView], lines: dict[str, int]
) -> PlanView | None:
    """The plan of the attempt shown (this file's, else the last accepted, else the last),
    each op with the reference line the Planner found it on."""
    pick = next((r for r in rows if r.this_file), None)
    pick = pick or next((r for r in reversed(rows) if r.accepted), None)
    pick = pick or (rows[-1] if rows else None)
    plan = plans.get((pick.run_id, pick.attempt)) if pick is not None else None
    if plan is None:
        return None
    for g in plan.groups:
        g.lines = [lines.get(op) for op in g.ops]
    return plan


async def attempts_for_async(
    server: StitchServer,
    reference: Path,
    candidate_text: str | None,
    notes: list[str] | None = None,
    plans: dict[tuple[str, int], PlanView] | None = None,
) -> list[AttemptRow]:
    """`attempts_for` in a worker thread: the event loop never waits for the trajectory walk."""
    return await asyncio.to_thread(attempts_for, server, reference, candidate_text, notes, plans)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError, OverflowError):
        return 0


def _attempt_row(rec: dict[str, Any], own: str | None) -> AttemptRow:
    verify = rec.get("verify") or {}
    rubric = rec.get("rubric") or {}
    meta = rec.get("metadata") or {}
    code = rec.get("code")
    return AttemptRow(
        run_id=str(rec.get("run_id", "")),
        attempt=_int(rec.get("attempt")),
        stage=str(rec.get("stage", "")),
        status=str(verify.get("status", "")),
        speedup_vs_eager=verify.get("speedup"),
        speedup_vs_compile=verify.get("speedup_vs_compile"),
        rubric=rubric.get("total"),
        reward=rec.get("reward"),
        correct=rec.get("correct"),
        accepted=bool(meta.get("accepted")),
        this_file=own is not None and isinstance(code, str) and _without_header(code) == own,
        created=meta.get("created"),
        message=str(verify.get("message", ""))[:300],
        rubric_items=[
            RubricItemView(
                name=name,
                score=_int(item.get("score")),
                reasons=[str(r) for r in item.get("reasons") or []][:12],
            )
            for name in RUBRIC_ITEMS
            if isinstance(item := rubric.get(name), dict)
        ],
    )


RUBRIC_ITEMS = ("anti_hacking", "engineering", "coverage", "compliance")


def _verify_summary(server: StitchServer, doc: OpenDocument) -> VerifySummary | None:
    store = getattr(server, "verify_store", None)
    if store is None:
        return None
    entry = store.get(doc.uri, doc.text)
    stale = entry is None
    if entry is None:
        entry = store.last(doc.uri)
    if entry is None:
        return None
    r = entry.result
    timing = r.timing
    bad = None
    if r.correctness is not None:
        bad = next((t for t in r.correctness.trials if not t.passed), None)
    return VerifySummary(
        status=r.status.value,
        title=entry.title,
        message=r.message,
        stale=stale,
        compile_only=entry.compile_only,
        speedup_vs_eager=r.speedup_vs_eager,
        speedup_vs_compile=r.speedup_vs_compile,
        eager_ms=timing.eager.median if timing and timing.eager else None,
        compiled_ms=timing.compiled.median if timing and timing.compiled else None,
        candidate_ms=timing.candidate.median if timing and timing.candidate else None,
        gpu=r.gpu_name,
        max_abs_error=bad.max_abs_error if bad is not None else None,
        timeline=timelines_view(r.timeline, r.gpu_name, entry.compile_only),
    )


def timeline_view(t: Timeline | None) -> TimelineView | None:
    if t is None:
        return None
    return TimelineView(
        forwards=t.forwards,
        kernels=t.kernels,
        window_ms=t.window_ms,
        busy_ms=t.busy_ms,
        busy_fraction=t.busy_fraction,
        gaps=t.gaps,
        gap_ms=t.gap_ms,
        max_gap_ms=t.max_gap_ms,
        host_ms=t.host_ms,
        streams=t.streams,
        top=[KernelShareView(name=k.name, ms=k.ms, calls=k.calls, share=k.share) for k in t.top],
    )


def timelines_view(
    report: TimelineReport | None, gpu: str | None, compile_only: bool
) -> TimelinesView:
    """Both sides' timelines, or why there is none: nothing is drawn that was not measured."""
    if report is None:
        why = (
            "no timing: compile-only verification, no GPU here"
            if compile_only or not gpu
            else "the verifier recorded no timeline for this run"
        )
        return TimelinesView(note=why)
    return TimelinesView(
        reference=timeline_view(report.reference),
        candidate=timeline_view(report.candidate),
        note=report.note,
    )


def kernel_row(k: ProfileResult, side: str, line: int | None = None) -> KernelRow:
    """The panel's row: the kernel's summary (the one projection the CLI table and the profile
    command use too, so the figures agree everywhere), plus the roofline point it plots."""
    s = summarize(k, line=line)
    roof = k.roofline
    return KernelRow(
        name=s.name,
        side=side,
        duration_us=s.duration_us,
        sm_pct=s.sm_throughput_pct,
        memory_pct=s.memory_throughput_pct,
        dram_gb_s=s.dram_gb_per_s,
        occupancy_pct=s.achieved_occupancy_pct,
        registers=s.registers_per_thread,
        block=k.launch.block_size or None,
        grid=k.launch.grid_size or None,
        bottleneck=s.bottleneck,
        arithmetic_intensity=s.arithmetic_intensity,
        gflops=roof.achieved_flops / 1e9 if roof else None,
        line=s.line,
    )


def roofs_from(kernels: list[ProfileResult], gpu_name: str | None) -> Roofs:
    """The roofs of the GPU the kernels ran on (else the verified one, else the default target).

    One source for every view: `agents.hardware`'s figures, which the Planner's floors use too
    (for the H200 the bandwidth a 2 GiB device-to-device copy sustained, 4.12 TB/s, not ncu's
    nominal DRAM peak of about 4.81 TB/s). Only a GPU that table does not know gets ncu's own
    roofs from the report."""
    measured = next(
        (k for k in kernels if k.roofline is not None and k.roofline.peak_dram_bytes_per_s > 0),
        None,
    )
    name = (measured.device if measured is not None else None) or gpu_name
    spec = spec_for(name) if name else default_target()
    ncu_gb_s = (
        measured.roofline.peak_dram_bytes_per_s / 1e9 if measured and measured.roofline else None
    )
    if measured is not None and measured.roofline is not None and spec.source.startswith("unknown"):
        return Roofs(
            peak_gflops=measured.roofline.peak_flops / 1e9,
            peak_gb_s=measured.roofline.peak_dram_bytes_per_s / 1e9,
            source=f"{name}: ncu's peaks from the report (a GPU without measured figures)",
            gpu=name,
        )
    return Roofs(
        peak_gflops=spec.fp32_tflops * 1000.0,
        peak_gb_s=spec.bandwidth_tb_s * 1000.0,
        source=f"{spec.name}: {spec.source}",
        gpu=spec.name,
        ncu_peak_gb_s=ncu_gb_s,
    )


async def results_for(server: StitchServer, uri: str) -> ResultsResponse:
    path = uri_to_path(uri)
    doc = server.documents.get(uri)
    name = path.name if path is not None else uri
    notes: list[str] = []
    if doc is None or path is None:
        return ResultsResponse(
            uri=uri, file=name, role="other", notes=["open the file in the editor first"]
        )
    a = doc.analysis if not doc.too_large else None
    role = "other"
    reference: Path | None = None
    if a is not None and a.language == "python":
        if a.module("ModelNew") is not None:
            role = "candidate"
            reference = path if a.module("Model") is not None else doc.reference_path()
        elif a.module("Model") is not None:
            role, reference = "reference", path
    response = ResultsResponse(
        uri=uri,
        file=name,
        role=role,
        reference=str(reference) if reference is not None else None,
    )
    roots = server.workspace_roots()
    if reference is not None:
        response.reference_label = shown_path(reference, roots)
        plans: dict[tuple[str, int], PlanView] = {}
        response.attempts = await attempts_for_async(
            server, reference, doc.text if role == "candidate" else None, notes, plans
        )
        lines = store_of(server).op_lines.get(path_key(reference), {})
        response.plan = plan_for(response.attempts, plans, lines)
    if not response.attempts:
        notes.append("no generate or optimize runs recorded for this reference yet")
    if role == "candidate":
        response.verify = _verify_summary(server, doc)
        if response.verify is None:
            notes.append("not verified in this session: run Verify against reference")
    candidate, reference_kernels = _kernels(server, doc, response, notes)
    response.kernels = candidate + reference_kernels
    gpu = response.verify.gpu if response.verify else None
    response.roofs = roofs_from(_profile_results(server, doc), gpu)
    if response.report:
        response.report_label = shown_path(Path(response.report), roots)
    from stitch_lsp.server.features.profile import profiler_problem

    response.profiler = profiler_problem(server)
    response.notes = notes
    return response


def shown_path(path: Path, roots: list[Path]) -> str:
    """A path as the panel prints it: relative to the workspace folder that holds it, else
    with the home folder as `~`; a developer's folders are not part of a result."""
    real = os.path.realpath(path)
    for root in [*roots, Path.home()]:
        if is_inside(real, [root]):
            rel = os.path.relpath(real, os.path.realpath(root))
            return display_path(rel if root in roots else os.path.join("~", rel))
    return display_path(path)


def _profile_results(server: StitchServer, doc: OpenDocument) -> list[ProfileResult]:
    stored = store_of(server).profiles.get(doc.uri)
    out: list[ProfileResult] = []
    if stored is not None:
        out += stored.report.kernels + (stored.reference.kernels if stored.reference else [])
    opened = store_of(server).reference_reports.get(doc.uri)
    if opened is not None and (stored is None or stored.reference is None):
        out += opened.kernels
    prof = _doc_profile(server, doc)[0]
    if prof is not None:
        out += [k for k, _ in prof.kernels]
    return out


def _doc_profile(server: StitchServer, doc: OpenDocument) -> tuple[Any, bool]:
    store = getattr(server, "profile_store", None)
    if store is None:
        return None, False
    prof = store.fresh(doc.uri, doc.text)
    if prof is not None:
        return prof, False
    latest = store.latest(doc.uri)
    return latest, latest is not None


def _kernels(
    server: StitchServer, doc: OpenDocument, response: ResultsResponse, notes: list[str]
) -> tuple[list[KernelRow], list[KernelRow]]:
    prof, stale = _doc_profile(server, doc)
    lines = {k.name: line for k, line in prof.kernels} if prof is not None else {}
    stored = store_of(server).profiles.get(doc.uri)
    opened = store_of(server).reference_reports.get(doc.uri)
    opened_rows = [kernel_row(k, "reference") for k in opened.kernels] if opened else []
    if stored is not None and (prof is None or stored.report.report_path == prof.report_path):
        response.report = stored.report.report_path
        response.profile_stale = stored.text_hash != text_hash(doc.text)
        candidate = [kernel_row(k, "candidate", lines.get(k.name)) for k in stored.report.kernels]
        reference: list[KernelRow] = []
        if stored.reference is not None:
            reference = [kernel_row(k, "reference") for k in stored.reference.kernels]
        elif opened_rows:
            reference = opened_rows
        elif stored.reference_error:
            notes.append(f"the reference was not profiled: {stored.reference_error}")
        else:
            notes.append(REFERENCE_NOT_PROFILED)
        return candidate, reference
    if prof is not None:
        response.report = prof.report_path
        response.profile_stale = stale
        if not opened_rows:
            notes.append(REFERENCE_NOT_PROFILED)
        return [kernel_row(k, "candidate", line) for k, line in prof.kernels], opened_rows
    notes.append("not profiled yet: run Profile with Nsight Compute (needs a GPU and ncu)")
    return [], opened_rows


REFERENCE_NOT_PROFILED = (
    "the reference's kernels are not on the chart: Profile (which runs the reference's Model "
    "too) or show a report of the reference"
)


# ---- registration -------------------------------------------------------------------------------


def register(server: StitchServer) -> None:
    store_of(server)

    @server.feature(RESULTS_METHOD)
    async def results_request(ls: StitchServer, params: Any) -> dict[str, Any]:
        uri = params.get("uri") if isinstance(params, dict) else getattr(params, "uri", None)
        if not isinstance(uri, str):
            raise ValueError(f"{RESULTS_METHOD} wants {{uri}}")
        return (await results_for(ls, uri)).to_wire()

    async def lenses(doc: OpenDocument) -> list[lsp.CodeLens]:
        client_commands = server.client_options.get("clientCommands") or []
        if SHOW_RESULTS not in client_commands or doc.path is None or doc.too_large:
            return []
        a = doc.analysis
        if a is None or a.language != "python":
            return []
        module = a.module("ModelNew")
        if module is None:
            model = a.module("Model")
            if model is None or not await attempts_for_async(server, doc.path, None):
                return []
            module = model
        pos = lsp.Position(line=module.selection_range[0], character=0)
        cmd = lsp.Command(title=SHOW_RESULTS_TITLE, command=SHOW_RESULTS, arguments=[doc.uri])
        return [lsp.CodeLens(range=lsp.Range(start=pos, end=pos), command=cmd)]

    server.register_code_lens_provider("results", lenses)
