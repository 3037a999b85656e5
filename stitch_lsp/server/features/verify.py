"""The Verifier in the editor: "Verify against reference" on `class ModelNew`.

A run is a scheduler job that builds and runs the user's code (refused in an untrusted
workspace). With a GPU it checks correctness, times the candidate against eager PyTorch and
torch.compile and looks for exploits; with none it only compiles and says so, because a build
proves neither correctness nor speed.

Results are kept per document and per content hash (of the candidate and of its reference), so
an edit makes them stale and undoing back to the verified text restores them without a new run.
Compile errors and exploit findings appear as the `stitch-verify` diagnostic source, only on the
text that was verified. A pass records its speedup (`VerifiedSpeedups`, for the profile hover and
the ncu lens) and in `stitch/status`.

Commands:
- `stitch.verify` [uri] or [{uri}]: verify the file's `ModelNew`. Its reference is the same file
  when it also defines `Model`, else the `# stitch-lsp: reference=PATH` header (relative to the
  file). The file must be saved: the worker runs what is on disk.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from stitch_lsp.analysis.document import uri_to_path
from stitch_lsp.analysis.model import Analysis, range_contains
from stitch_lsp.files import unreadable_reason
from stitch_lsp.models.commands import CommandResult, VerifyCommandResult
from stitch_lsp.models.findings import Finding, Severity
from stitch_lsp.models.verify import VerifyResult, VerifyStatus
from stitch_lsp.server.documents import path_key, text_hash
from stitch_lsp.server.features.common import (
    AfterSave,
    DiskTexts,
    VerifiedSpeedups,
    fail,
    lens,
    read_disk_text,
    uri_argument,
)
from stitch_lsp.verify.baselines import LABELS as BASELINE_LABELS

if TYPE_CHECKING:
    from stitch_lsp.server.app import StitchServer
    from stitch_lsp.server.documents import OpenDocument
    from stitch_lsp.server.jobs import JobContext

SOURCE = "stitch-verify"
VERIFY = "stitch.verify"
STATIC_SOURCE = "stitch"  # findings of the static checks, which the Verifier runs first
VERIFY_TITLE = "Verify against reference"
NO_GPU_NOTE = "no CUDA GPU here, so correctness and speed were NOT verified"
_KEEP = 64  # verified contents remembered (all documents together)


@dataclass
class Verified:
    """One verify result, for the candidate text (and reference text) it was run on."""

    result: VerifyResult
    title: str
    reference: str  # path_key of the reference
    reference_hash: str
    compile_only: bool


@dataclass
class VerifyStore:
    """Results by (candidate uri, text hash); findings by (path_key, text hash) for every file
    the run reported on (the candidate, a `load()`ed .cu file)."""

    results: OrderedDict[tuple[str, str], Verified] = field(default_factory=OrderedDict)
    latest: dict[str, str] = field(default_factory=dict)  # uri -> text hash of the last run
    findings: OrderedDict[tuple[str, str], list[Finding]] = field(default_factory=OrderedDict)

    def put(self, uri: str, text: str, entry: Verified) -> None:
        key = (uri, text_hash(text))
        self.results[key] = entry
        self.results.move_to_end(key)
        self.latest[uri] = key[1]
        while len(self.results) > _KEEP:
            self.results.popitem(last=False)

    def put_findings(self, path: str, text: str, items: list[Finding]) -> None:
        key = (path_key(path), text_hash(text))
        self.findings[key] = items
        self.findings.move_to_end(key)
        while len(self.findings) > _KEEP:
            self.findings.popitem(last=False)

    def get(self, uri: str, text: str) -> Verified | None:
        return self.results.get((uri, text_hash(text)))

    def last(self, uri: str) -> Verified | None:
        h = self.latest.get(uri)
        return self.results.get((uri, h)) if h else None


def register(server: StitchServer) -> None:
    store = server.store(VerifyStore)
    after_save = AfterSave(server)

    def fresh(doc: OpenDocument) -> Verified | None:
        entry = store.get(doc.uri, doc.text)
        if entry is None:
            return None
        ref_text = _text_of(server, Path(entry.reference))
        return (
            entry if ref_text is not None and text_hash(ref_text) == entry.reference_hash else None
        )

    def diagnostics(doc: OpenDocument) -> list[Finding]:
        if doc.path is None:
            return []
        return list(store.findings.get((path_key(doc.path), text_hash(doc.text)), []))

    def lenses(doc: OpenDocument) -> list[lsp.CodeLens]:
        a = _analysis(doc)
        new = a.module("ModelNew") if a is not None else None
        if a is None or new is None or _pair(doc.path, a)[0] is None:
            return []
        row = new.selection_range[0]
        out = [lens(row, VERIFY_TITLE, VERIFY, [doc.uri])]
        entry = fresh(doc)
        if entry is not None:
            out.append(lens(row, entry.title, VERIFY, [doc.uri]))
        elif (old := store.last(doc.uri)) is not None:
            out.append(lens(row, f"{old.title} (stale: file changed)", VERIFY, [doc.uri]))
        return out

    def actions(doc: OpenDocument, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        a = _analysis(doc)
        new = a.module("ModelNew") if a is not None else None
        if a is None or new is None or _pair(doc.path, a)[0] is None:
            return []
        line, char = params.range.start.line, params.range.start.character
        inside = range_contains(new.range, line, char) or any(
            range_contains(k.range, line, char) for k in a.kernels
        )
        if not inside:
            return []
        cmd = lsp.Command(title=VERIFY_TITLE, command=VERIFY, arguments=[doc.uri])
        return [lsp.CodeAction(title=VERIFY_TITLE, kind=lsp.CodeActionKind.Source, command=cmd)]

    async def verify_command(ls: StitchServer, *args: Any) -> CommandResult:
        return await start_verify(ls, store, uri_argument(args, VERIFY))

    async def on_save(doc: OpenDocument) -> None:
        if not server.settings.verify_on_save:
            return
        a = _analysis(doc)
        if a is None or a.module("ModelNew") is None or _pair(doc.path, a)[0] is None:
            return
        after_save.schedule(doc, lambda: start_verify(server, store, doc.uri, quiet=True))

    def hover(doc: OpenDocument, pos: lsp.Position) -> str | None:
        a = _analysis(doc)
        new = a.module("ModelNew") if a is not None else None
        if new is None or not range_contains(new.selection_range, pos.line, pos.character):
            return None
        entry = fresh(doc)
        if entry is None or entry.compile_only:
            return None
        from stitch_lsp.verify.report import hover_markdown

        return hover_markdown(entry.result, entry.title)

    server.register_diagnostic_source(SOURCE, diagnostics)
    server.register_hover_provider("verify", hover)
    server.register_code_lens_provider("verify", lenses)
    server.register_code_action_provider("verify", actions)
    server.register_command(VERIFY, verify_command, executes_code=True)
    server.save_listeners.append(on_save)


# ---- running ----------------------------------------------------------------------------------


async def start_verify(
    ls: StitchServer, store: VerifyStore, uri: str, *, quiet: bool = False
) -> CommandResult:
    """Queue a verify job for `uri`, then store, publish and announce its result."""
    from stitch_lsp.server.jobs import JobSpec, JobState, content_key

    path = uri_to_path(uri)
    if path is None or path.suffix != ".py" or not path.is_file():
        return _fail(ls, "verify works on a saved .py file that defines ModelNew", quiet)
    doc = ls.documents.get(uri)
    try:
        disk = await read_disk_text(ls, path)
    except OSError as exc:
        return _fail(ls, f"cannot verify: {unreadable_reason(exc)}", quiet)
    if doc is not None and doc.text != disk:
        return _fail(ls, "save the file first: the Verifier runs what is on disk", quiet)
    text = disk
    a = doc.analysis if doc is not None else _analyze(uri, text, ls)
    if a is None or a.module("ModelNew") is None:
        return _fail(ls, f"{path.name} defines no `class ModelNew` to verify", quiet)
    reference, problem = _pair(path, a)
    if reference is None:
        return _fail(ls, problem, quiet)
    ref_doc = next((d for d in ls.documents.values() if d.path and _same(d.path, reference)), None)
    try:
        ref_text = await read_disk_text(ls, reference)
    except OSError as exc:
        return _fail(ls, f"cannot verify against the reference: {unreadable_reason(exc)}", quiet)
    if ref_doc is not None and ref_doc is not doc and ref_doc.text != ref_text:
        return _fail(ls, f"save the reference {reference.name} first", quiet)

    compile_only = not ls.jobs.devices
    settings = ls.settings
    relevant = settings.model_dump(
        include={
            "trials",
            "timing_trials",
            "allow_tf32",
            "extra_baselines",
            "verify_timeout_s",
            "python_for_workers",
        }
    )

    async def run(ctx: JobContext) -> VerifyResult:
        from stitch_lsp.verify import verify

        ctx.report("compiling" if compile_only else "building, checking and timing")
        return await ctx.run_blocking(
            lambda: verify(
                reference,
                path,
                settings,
                device=ctx.device,
                compile_only=compile_only,
                cancel=ctx.cancel_event,
            )
        )

    spec = JobSpec(
        kind="verify",
        run=run,
        uri=uri,
        version=doc.version if doc is not None else None,
        needs_gpu=not compile_only,
        executes_code=True,
        cache_key=content_key(
            text + "\0" + ref_text, "verify", {**relevant, "compile_only": compile_only}
        ),
        depends_on=frozenset({path_key(reference)}),
        cancel_on_change=False,  # it runs the saved file; the result is keyed by that text
        title=f"stitch: verifying {path.name}"
        + (
            f" (compile only: {'torch missing' if ls.torch_problem else 'no GPU'})"
            if compile_only
            else ""
        ),
        summarize=lambda r: (f"verify {path.name}: {result_title(r)}", _speedup(r)),
    )
    outcome = await ls.jobs.run(spec)
    result = outcome.result
    if outcome.state is JobState.cancelled:
        return CommandResult(ok=False, state="cancelled", message=outcome.message or "cancelled")
    if outcome.state not in (JobState.done, JobState.cached) or not isinstance(
        result, VerifyResult
    ):
        return _fail(ls, outcome.message or outcome.state.value, quiet, state=outcome.state.value)

    title = result_title(result)
    entry = Verified(result, title, path_key(reference), text_hash(ref_text), compile_only)
    store.put(uri, text, entry)
    _store_findings(ls, store, result, path, text)
    speedup = _speedup(result)
    if speedup is not None:
        ls.store(VerifiedSpeedups).record(uri, text, speedup)
    message = result_message(result)
    kind = lsp.MessageType.Info if result.ok else lsp.MessageType.Warning
    if quiet:
        ls.log(f"stitch: verify {path.name}: {message}", kind)
    else:
        ls.window_show_message(
            lsp.ShowMessageParams(type=kind, message=f"stitch: verify {path.name}: {message}")
        )
    await ls.refresh_code_lenses()
    return VerifyCommandResult(
        ok=result.ok,
        status=result.status.value,
        title=title,
        message=message,
        compile_only=compile_only,
        cached=outcome.state is JobState.cached,
        reference=str(reference),
        device=result.device,
        speedup_vs_eager=result.speedup_vs_eager,
        speedup_vs_compile=result.speedup_vs_compile,
        diagnostics=len(result.diagnostics),
        wall_seconds=result.wall_seconds,
        sandbox=result.sandbox,
    )


def _store_findings(
    ls: StitchServer, store: VerifyStore, result: VerifyResult, candidate: Path, text: str
) -> None:
    """Findings per file, keyed by the text of that file they were reported on; republish."""
    by_path: dict[str, list[Finding]] = {path_key(candidate): []}
    for f in result.diagnostics:
        if f.source == STATIC_SOURCE:
            continue  # the static checks' own source already shows these on every edit
        by_path.setdefault(path_key(f.path), []).append(f.model_copy(update={"source": SOURCE}))
    for key, items in by_path.items():
        body = text if key == path_key(candidate) else _text_of(ls, Path(key))
        if body is not None:
            store.put_findings(key, body, items)
    for d in list(ls.documents.values()):
        if d.path is not None and path_key(d.path) in by_path:
            ls.schedule_publish(d.uri, delay_ms=0)


# ---- what the result says -----------------------------------------------------------------------


def result_title(result: VerifyResult) -> str:
    """The lens one-liner."""
    s = result.status
    if s is VerifyStatus.passed:
        title = "✓ passed"
        if result.speedup_vs_eager is not None:
            title += f" · {result.speedup_vs_eager:.2f}x vs eager"
        if result.speedup_vs_compile is not None:
            title += f" · {result.speedup_vs_compile:.2f}x vs torch.compile"
        if result.speedup_vs_best is not None and result.best_baseline not in (None, "eager"):
            best = BASELINE_LABELS.get(result.best_baseline or "", result.best_baseline)
            title += f" · {result.speedup_vs_best:.2f}x vs best ({best})"
        tl = result.timeline.candidate if result.timeline else None
        if tl is not None:
            title += f" · {tl.kernels:g} kernels, GPU {tl.busy_fraction:.0%} busy"
        return title
    if s is VerifyStatus.compile_error:
        n = sum(
            1
            for d in result.diagnostics
            if d.severity is Severity.error and d.source != STATIC_SOURCE
        )
        return f"compile error ({n})" if n else "compile error"
    if s is VerifyStatus.no_gpu:
        built = result.build is not None and result.build.kind != "none"
        why = "torch missing" if "torch is not installed" in result.message else "no GPU"
        return f"compiled ({why}: not run)" if built else f"nothing to compile ({why}: not run)"
    if s is VerifyStatus.incorrect:
        return "✗ incorrect" + _mismatch(result)
    if s is VerifyStatus.exploit:
        what = result.exploits[0].code if result.exploits else _short(result.message)
        return f"✗ exploit: {what}"
    if s is VerifyStatus.timeout:
        return "✗ timed out"
    return f"✗ runtime error: {_short(result.message)}"


def result_message(result: VerifyResult) -> str:
    """The pop-up: the one-liner, plus the plain statement of what was not checked."""
    if result.status is VerifyStatus.no_gpu:
        return f"{result_title(result)}: {NO_GPU_NOTE}"
    detail = result.message if result.status is not VerifyStatus.passed else ""
    title = result_title(result)
    return f"{title} ({detail})" if detail and detail not in title else title


def _mismatch(result: VerifyResult) -> str:
    c = result.correctness
    bad = next((t for t in c.trials if not t.passed), None) if c is not None else None
    if bad is None or bad.max_abs_error is None:
        return f": {_short(result.message)}" if result.message else ""
    where = f" at ({', '.join(map(str, bad.first_mismatch))})" if bad.first_mismatch else ""
    return f": max abs err {_sci(bad.max_abs_error)}{where}"


def _sci(x: float) -> str:
    """3.1e-2, not 3.1e-02."""
    mant, _, exp = f"{x:.1e}".partition("e")
    return f"{mant}e{int(exp)}"


def _short(text: str, n: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _speedup(result: Any) -> float | None:
    if isinstance(result, VerifyResult) and result.ok:
        return result.speedup_vs_eager
    return None


# ---- pairs and helpers --------------------------------------------------------------------------


def _pair(path: Path | None, a: Analysis) -> tuple[Path | None, str]:
    """(reference, '') or (None, why not)."""
    if path is None:
        return None, "the file is not on disk"
    if a.module("Model") is not None:
        return path, ""  # a KernelBench file with both Model and ModelNew is its own pair
    if a.reference_header:
        ref = Path(a.reference_header)
        ref = ref if ref.is_absolute() else path.parent / ref
        if not ref.is_file():
            return None, f"the reference named in the header does not exist: {ref}"
        return ref, ""
    return None, (
        f"{path.name} has no reference: define `Model` in the same file, or add a "
        "`# stitch-lsp: reference=PATH` header (relative to this file)"
    )


def _analysis(doc: OpenDocument) -> Analysis | None:
    if doc.path is None or doc.path.suffix != ".py" or doc.too_large:
        return None
    a = doc.analysis
    return a if a is not None and a.language == "python" else None


def _analyze(uri: str, text: str, ls: StitchServer) -> Analysis | None:
    from stitch_lsp.analysis import Document, analyze

    try:
        return analyze(Document(uri, text, "python"), ls.settings)
    except Exception:
        return None


def _text_of(ls: StitchServer, path: Path) -> str | None:
    """The editor's text of an open file, else the file on disk (bounded, cached by stat:
    lenses and hovers ask on the event loop)."""
    for d in list(ls.documents.values()):
        if d.path is not None and _same(d.path, path):
            return d.text
    return ls.store(DiskTexts).get(path, ls.settings.max_file_bytes)


def _same(a: Path, b: Path) -> bool:
    return path_key(a) == path_key(b)


def _fail(ls: StitchServer, message: str, quiet: bool, state: str | None = None) -> CommandResult:
    return fail(
        ls, message, quiet=quiet, prefix="stitch: verify" if quiet else "stitch", state=state
    )
