"""StitchServer: the pygls server, its plug-in registry, diagnostics publishing and settings.

The LSP handlers themselves live in `handlers.py`; features (static checks, profile, generate,
verify) live in `features/<name>.py` and plug in through the `register_*` methods below.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import importlib
import inspect
import logging
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TypeVar, cast

from lsprotocol import types as lsp
from pydantic import ValidationError
from pydantic.alias_generators import to_camel
from pygls.exceptions import FeatureRequestError
from pygls.lsp.server import LanguageServer
from pygls.protocol import lsp_method

from stitch_lsp import __version__
from stitch_lsp.config import Settings, environment_values
from stitch_lsp.models.findings import Finding
from stitch_lsp.models.server import STATUS_METHOD, StatusParams
from stitch_lsp.server.cluster import ClusterLink
from stitch_lsp.server.convert import finding_to_diagnostic
from stitch_lsp.server.documents import OpenDocument, PushedDiagnostics
from stitch_lsp.server.jobs import JobScheduler
from stitch_lsp.server.lifeline import Lifeline
from stitch_lsp.server.progress import LspProgress
from stitch_lsp.server.protocol import GuardedProtocol
from stitch_lsp.server.registry import (
    CodeActionProvider,
    CodeLensProvider,
    CommandHandler,
    CommandSpec,
    DiagnosticSource,
    FileChangeListener,
    HoverProvider,
    SaveListener,
    SettingsListener,
)
from stitch_lsp.server.scopes import (
    USER_SETTINGS_KEY,
    apply_scopes,
    snake_keys,
    user_level_keys,
)
from stitch_lsp.server.watchdog import LoopWatchdog
from stitch_lsp.workers.launch import default_launcher

log = logging.getLogger(__name__)

CLUSTER_POLL_S = 5.0
T = TypeVar("T")
S = TypeVar("S")

FEATURE_MODULES: list[str] = [
    "stitch_lsp.server.features.static",
    "stitch_lsp.server.features.profile",
    "stitch_lsp.server.features.generate",
    "stitch_lsp.server.features.verify",
    "stitch_lsp.server.features.jobs_view",
    "stitch_lsp.server.features.navigation",
    "stitch_lsp.server.features.results",
    "stitch_lsp.server.features.export",
]
"""Feature modules loaded by `create_server`, in order (hover sections follow this order).

Each one defines `register(server: StitchServer) -> None`. Add yours here. Modules named in
the environment variable STITCH_EXTRA_FEATURES (comma-separated) load after these: site plug-ins,
and the test suite's fake features.
"""


TRUST_ENV = "STITCH_TRUST"
"""`STITCH_TRUST=1` (or `serve --trust`): a client that says nothing about trust is trusted."""


def is_trusted(options: dict[str, Any]) -> bool:
    """Whether the workspace is trusted: only the JSON boolean `true` in
    `initializationOptions.trusted` says so ("false", 0, {} and null do not). A client that
    sends no `trusted` at all gets trust only when whoever started the server said so, with
    `serve --trust` or STITCH_TRUST=1: the client may be one that knows nothing of trust,
    opening any folder."""
    if "trusted" in options:
        return options["trusted"] is True
    return os.environ.get(TRUST_ENV, "").strip().lower() in ("1", "true")


@dataclass
class SettingsReport:
    """What `apply_settings` did not use, by camelCase key."""

    rejected: list[str] = field(default_factory=list)
    ignored: dict[str, str] = field(default_factory=dict)
    environment: list[str] = field(default_factory=list)


@contextmanager
def gc_deferred() -> Iterator[None]:
    """Keep Python's cyclic GC out of the edit -> diagnostics path.

    A generation-1 collection over the objects of recent analyses costs about 20 ms on a
    3,000-line file and fell inside roughly one edit in twelve, which set the p95. Paused here,
    it runs at the first allocation after the diagnostics are sent (BENCHMARKS.md).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class StitchProtocol(GuardedProtocol):
    """Pins the position encoding to UTF-16: the analysis layer counts columns in UTF-16 units.

    UTF-16 is the one encoding every client must support, so a client that would prefer
    UTF-8 (Neovim does) still works, and no column is ever off after a non-ASCII character.
    """

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(self, params: lsp.InitializeParams):
        general = params.capabilities.general
        if general is not None and general.position_encodings:
            general.position_encodings = [lsp.PositionEncodingKind.Utf16]
        return (yield from super().lsp_initialize(params))


class StitchServer(LanguageServer):
    """The language server, plus a registry that feature modules fill in at start-up."""

    def __init__(self, devices: list[str] | None = None) -> None:
        super().__init__(
            "stitch-lsp",
            __version__,
            text_document_sync_kind=lsp.TextDocumentSyncKind.Incremental,
            protocol_cls=StitchProtocol,
            max_workers=4,
        )
        self.settings: Settings = Settings.from_sources(strict=False)
        self.user_level: frozenset[str] = frozenset(Settings.model_fields)
        """Settings whose current value the workspace did not choose (see `scopes`)."""
        self.trusted: bool = False  # decided by `initialize` (see `is_trusted`)
        self.initialized: bool = False
        self.documents: dict[str, OpenDocument] = {}
        self.diagnostic_sources: dict[str, DiagnosticSource] = {}
        self.hover_providers: dict[str, HoverProvider] = {}
        self.code_lens_providers: dict[str, CodeLensProvider] = {}
        self.code_action_providers: dict[str, CodeActionProvider] = {}
        self.commands: dict[str, CommandSpec] = {}
        self.file_change_listeners: list[FileChangeListener] = []
        self.settings_listeners: list[SettingsListener] = []
        self.save_listeners: list[SaveListener] = []
        self._init_settings: dict[str, Any] = {}
        self._user_settings: dict[str, Any] | None = None
        self._notices_shown: set[str] = set()
        self.client_options: dict[str, Any] = {}
        """initializationOptions as the client sent them (e.g. `clientCommands`)."""
        self._fixed_devices = devices
        self._errors_seen: set[tuple[str, str, str]] = set()
        self.load_errors: list[str] = []
        self.startup_report = SettingsReport()
        self._debounce: dict[str, asyncio.Task[None]] = {}
        self._stores: dict[type, object] = {}
        self.publish_count = 0
        self.exit_code = 0  # what `exit` asked for: 0 after `shutdown`, else 1
        self.watchdog: LoopWatchdog | None = None  # set when STITCH_LOOP_WATCHDOG is
        self.torch_problem: str | None = None  # why the workers cannot use torch, if they cannot
        self.lifeline = Lifeline(self._orphaned)  # started by `start_io`
        self.executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="stitch-job")
        self.cluster = ClusterLink()
        self._last_status: tuple[str, str, float | None] = ("idle", "", None)
        self._cluster_poll: asyncio.Task[None] | None = None
        # Large documents' analyses and reference reads: never queued behind a long job.
        self.analysis_executor = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="stitch-analysis"
        )
        self.jobs = JobScheduler(
            devices or [],
            progress=LspProgress(self),
            on_status=self.send_status,
            current_version=self._version_of,
            may_execute=lambda: self.trusted,
            executor=self.executor,
        )

    # ---- transport ----------------------------------------------------------------------------

    def start_io(
        self,
        stdin: BinaryIO | Any | None = None,
        stdout: BinaryIO | None = None,
        *,
        watch_parent: bool = True,
    ) -> None:
        """Serve LSP on stdio (or an accepted socket) through our own framing (`stream.py`)
        until `exit`, the end of the input, or the editor's death (`lifeline`); `exit_code` says
        how it ended. `watch_parent`: also end when the process that started the server dies
        (stdio: that process is the editor)."""
        from stitch_lsp.server.stream import OutputWriter, StreamServer

        self.lifeline.watch_parent = watch_parent
        self.lifeline.start()
        self._stop_event = threading.Event()
        self.protocol.set_writer(OutputWriter(stdout or sys.stdout.buffer))
        reader = StreamServer(self.protocol, self._stop_event)
        self.watchdog = LoopWatchdog.from_env(lambda: reader.last_method)

        async def serve() -> None:
            if self.watchdog is not None:
                self.watchdog.start()
            await reader.serve(stdin or sys.stdin.buffer)

        try:
            asyncio.run(serve())
        except SystemExit as exc:  # the `exit` notification
            self.exit_code = exc.code if isinstance(exc.code, int) else 1
        except BrokenPipeError:
            log.error("the client closed the connection; shutting down")
        except KeyboardInterrupt:
            pass
        finally:
            if self.watchdog is not None:
                self.watchdog.write_report()
            self.shutdown()

    def _orphaned(self, why: str) -> None:
        """The editor is gone (see `lifeline`): end every worker and the process now, from the
        lifeline's thread, since the event loop may be the thing that hangs."""
        try:
            self.jobs.kill_all_processes()
        except Exception:
            log.exception("could not end the workers")
        leaving = threading.Thread(target=self.cluster.leave, name="stitch-leave", daemon=True)
        leaving.start()
        leaving.join(5.0)
        logging.shutdown()
        os._exit(1)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """pygls's own errors (a notification that failed, a message it could not read) go to
        the log, once each: they are not the user's to act on, so no pop-up. A failed request
        is answered with its error already."""
        if source is FeatureRequestError:
            return
        self.report_error("the LSP connection", error)

    # ---- registry (called by feature modules' register()) ----------------------------------

    def register_diagnostic_source(self, name: str, source: DiagnosticSource) -> None:
        """A named source recomputed on each publish; replaces any source of the same name."""
        self.diagnostic_sources[name] = source

    def register_hover_provider(self, name: str, provider: HoverProvider) -> None:
        self.hover_providers[name] = provider

    def register_code_lens_provider(self, name: str, provider: CodeLensProvider) -> None:
        self.code_lens_providers[name] = provider

    def register_code_action_provider(self, name: str, provider: CodeActionProvider) -> None:
        self.code_action_providers[name] = provider

    def register_command(
        self, name: str, handler: CommandHandler, *, executes_code: bool = True
    ) -> None:
        """Add a `workspace/executeCommand` command; advertised only if it may run here.

        Register before `initialize` (i.e. in your feature's `register`): capabilities are
        computed once. Commands that run code are left out when the workspace is untrusted.
        """
        if self.initialized:
            raise RuntimeError(
                f"command {name!r} registered after initialize; it would not be advertised"
            )
        self.commands[name] = CommandSpec(name, handler, executes_code)

    def command_enabled(self, name: str) -> bool:
        """Whether a command is registered and allowed (trust) in this session."""
        spec = self.commands.get(name)
        return spec is not None and (self.trusted or not spec.executes_code)

    # ---- diagnostics --------------------------------------------------------------------------

    def set_diagnostics(
        self,
        uri: str,
        source: str,
        diagnostics: Sequence[lsp.Diagnostic | Finding],
        *,
        version: int | None = None,
    ) -> None:
        """Push diagnostics of one source for a document (e.g. 'ncu' after a profile) and publish.

        With `version`, they vanish as soon as the document changes past that version.
        """
        doc = self.documents.get(uri)
        if doc is None:
            return
        doc.pushed[source] = PushedDiagnostics(list(diagnostics), version)
        self.schedule_publish(uri, delay_ms=0)

    def clear_diagnostics(self, uri: str, source: str) -> None:
        doc = self.documents.get(uri)
        if doc is not None and doc.pushed.pop(source, None) is not None:
            self.schedule_publish(uri, delay_ms=0)

    def schedule_publish(self, uri: str, delay_ms: int | None = None) -> None:
        """Publish after `delay_ms` (default: the debounce setting), replacing a pending one."""
        self.cancel_publish(uri)
        delay = self.settings.debounce_ms if delay_ms is None else delay_ms
        self._debounce[uri] = asyncio.get_running_loop().create_task(
            self._publish_later(uri, delay)
        )

    def cancel_publish(self, uri: str) -> None:
        """Drop a pending (debounced) publish of `uri`."""
        pending = self._debounce.pop(uri, None)
        if pending is not None and not pending.done():
            pending.cancel()

    def cancel_pending_publishes(self) -> None:
        for uri in list(self._debounce):
            self.cancel_publish(uri)

    async def _publish_later(self, uri: str, delay_ms: int) -> None:
        if delay_ms > 0:
            await asyncio.sleep(delay_ms / 1000.0)
        await self.publish(uri)

    async def publish(self, uri: str) -> None:
        """Analyse the latest text (if needed) and publish every source's diagnostics, merged."""
        doc = self.documents.get(uri)
        if doc is None:
            return
        version = doc.version
        t0 = time.perf_counter()
        try:
            await doc.ensure_analysis(self.analysis_executor)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.report_error("analysis", exc)
        if self.documents.get(uri) is not doc or doc.version != version:
            return  # an edit arrived meanwhile; its own publish follows
        results: list[tuple[str, Any]] = []
        awaiting: list[tuple[str, Awaitable[Any]]] = []
        with gc_deferred():
            doc.drop_stale_pushed()
            for name, source in list(self.diagnostic_sources.items()):
                try:
                    items = source(doc)
                except Exception as exc:
                    self.report_error(f"diagnostics:{name}", exc)
                    continue
                if inspect.isawaitable(items):
                    awaiting.append((name, items))
                else:
                    results.append((name, items))
            if not awaiting:
                self._send_diagnostics(doc, version, results, t0)
                return
        for name, pending in awaiting:
            try:
                results.append((name, await pending))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.report_error(f"diagnostics:{name}", exc)
        current = self.documents.get(uri)
        if current is not doc or doc.version != version:
            return  # an edit arrived while a source was awaited; its own publish follows
        with gc_deferred():
            self._send_diagnostics(doc, version, results, t0)

    def _send_diagnostics(
        self, doc: OpenDocument, version: int, results: list[tuple[str, Any]], t0: float
    ) -> None:
        merged: list[lsp.Diagnostic] = []
        for name, items in results:
            merged.extend(self._as_diagnostics(items or [], doc, name))
        for name, pushed in doc.pushed.items():
            merged.extend(self._as_diagnostics(pushed.diagnostics, doc, name))
        self.publish_count += 1
        self.text_document_publish_diagnostics(
            lsp.PublishDiagnosticsParams(uri=doc.uri, version=version, diagnostics=merged)
        )
        doc.publish_ms = (time.perf_counter() - t0) * 1000.0

    def _as_diagnostics(
        self, items: Sequence[lsp.Diagnostic | Finding], doc: OpenDocument, source: str
    ) -> list[lsp.Diagnostic]:
        out: list[lsp.Diagnostic] = []
        for item in items:
            if isinstance(item, Finding):
                out.append(finding_to_diagnostic(item, doc.line_length))
            elif isinstance(item, lsp.Diagnostic):
                if item.source is None:
                    item.source = source
                out.append(item)
        return out

    # ---- settings -----------------------------------------------------------------------------

    def set_initialization_options(self, options: Any) -> None:
        """Read `initializationOptions`: `settings`, `userSettings` (values the editor vouches
        come from user-level settings; see `scopes`) and `trusted`."""
        opts = options if isinstance(options, dict) else {}
        self.client_options = opts
        settings, user = opts.get("settings"), opts.get(USER_SETTINGS_KEY)
        self._init_settings = settings if isinstance(settings, dict) else {}
        self._user_settings = dict(user) if isinstance(user, dict) else None
        self.trusted = is_trusted(opts)

    def apply_settings(self, raw: dict[str, Any] | None) -> SettingsReport:
        """Merge initializationOptions.settings and the client's `stitch` section into Settings.

        Invalid values are dropped one by one (and named in the report) instead of rejecting
        the whole section, so one typo does not reset every other setting. Values a workspace
        may not set are ignored (see `scopes`) and named too.
        """
        raw = dict(raw or {})
        pulled_user = raw.pop(USER_SETTINGS_KEY, None)
        if isinstance(pulled_user, dict) and self._user_settings is not None:
            self._user_settings = dict(pulled_user)  # only from a client that sent it at start
        lsp_values = {**self._init_settings, **raw}
        environment, problems = environment_values()
        scoped = apply_scopes(lsp_values, self._user_settings, environment)
        report = SettingsReport(ignored=scoped.ignored, environment=problems)
        values = scoped.values
        for _ in range(len(values) + 1):
            try:
                self.settings = Settings.from_sources(lsp=values, strict=False)
                break
            except ValidationError as exc:
                bad = set(snake_keys({str(e["loc"][0]): 0 for e in exc.errors() if e.get("loc")}))
                bad &= set(values)
                if not bad:
                    self.settings = Settings.from_sources(strict=False)
                    break
                report.rejected.extend(sorted(to_camel(k) for k in bad))
                values = {k: v for k, v in values.items() if k not in bad}
        self.user_level = user_level_keys(lsp_values, self._user_settings, self.settings)
        return report

    def show_settings_report(self, report: SettingsReport) -> None:
        """Say what was not used: invalid values (a warning each time), values a workspace may
        not set (logged each time, a notice once per setting)."""
        if report.rejected:
            self.window_show_message(
                lsp.ShowMessageParams(
                    type=lsp.MessageType.Warning,
                    message="stitch-lsp: ignored invalid setting(s) "
                    f"{', '.join('stitch.' + k for k in report.rejected)}; using their defaults",
                )
            )
        for problem in report.environment:
            self.log(f"stitch-lsp: ignored environment variable {problem}", lsp.MessageType.Warning)
        for key, why in report.ignored.items():
            self.log(f"stitch-lsp: {why}", lsp.MessageType.Warning)
            if key not in self._notices_shown:
                self._notices_shown.add(key)
                self.window_show_message(
                    lsp.ShowMessageParams(type=lsp.MessageType.Warning, message=f"stitch: {why}")
                )

    def workspace_roots(self) -> list[Path]:
        """The workspace folders on disk, the root first; [] when the client named none."""
        from stitch_lsp.analysis.document import uri_to_path

        roots: list[Path] = []
        try:
            ws = self.workspace
        except RuntimeError:  # before initialize
            return roots
        if ws.root_path:
            roots.append(Path(ws.root_path))
        for folder in ws.folders.values():
            path = uri_to_path(folder.uri)
            if path is not None and path not in roots:
                roots.append(path)
        return roots

    async def warm_up(self) -> None:
        """Load the grammars and compile the queries now, so the first didOpen is not the one
        that pays for it (about 0.3 s in all).

        One query at a time on the loop, yielding in between: compiling a query is one C call
        that holds the GIL (20-70 ms for a CUDA query), so a worker thread would block the
        loop just the same, and all seven at once would block it for the whole 0.3 s."""
        from stitch_lsp.analysis import Document, analyze, grammars

        for name in ("python", "cuda"):
            for scm in sorted((grammars.grammars_dir() / name).glob("*.scm")):
                grammars.query(name, scm.stem)
                await asyncio.sleep(0)
        py = (
            "from torch.utils.cpp_extension import load_inline\n"
            'src = r"""\n__global__ void k() {}\n"""\n'
        )
        analyze(Document("untitled:warm-up.py", py, "python"), self.settings)
        await asyncio.sleep(0)
        analyze(
            Document("untitled:warm-up.cu", "__global__ void k() {}\n", "cuda-cpp"), self.settings
        )

    def pin_devices(self, devices: list[str]) -> None:
        """Use exactly these GPUs instead of discovering them (tests, site plug-ins)."""
        self._fixed_devices = list(devices)

    async def refresh_devices(self) -> None:
        """Find the GPUs (nvidia-smi may take a moment: off the event loop)."""
        if self._fixed_devices is not None:
            self.jobs.set_devices(self._fixed_devices)
            return
        from stitch_lsp.workers.devices import discover_gpus, torch_missing

        loop = asyncio.get_running_loop()
        address = self.settings.cluster
        if address and not self.trusted:
            self.log("stitch.cluster is set, but the workspace is not trusted: nothing is sent.")
        elif address:
            try:
                slots = await loop.run_in_executor(self.executor, self.cluster.use, address)
            except Exception as exc:
                self.window_show_message(
                    lsp.ShowMessageParams(
                        type=lsp.MessageType.Warning,
                        message=f"stitch-lsp: {exc}. Using this machine's GPUs instead.",
                    )
                )
            else:
                self.jobs.launcher = self.cluster.launcher
                self.jobs.set_devices(slots)
                if self._cluster_poll is None or self._cluster_poll.done():
                    self._cluster_poll = loop.create_task(self._poll_cluster())
                s = self.cluster.status
                self.log(f"cluster {address}: {s.nodes} node(s), {s.gpus:g} GPU(s)")
                self.send_status("idle", f"cluster {address}")
                return
        if self.cluster.connected:
            await loop.run_in_executor(self.executor, self.cluster.leave)
            self.jobs.launcher = default_launcher()
        devices = await loop.run_in_executor(self.executor, discover_gpus, self.settings.device)
        # Every GPU job needs torch in the worker: without it, say so rather than "no GPU".
        self.torch_problem = await loop.run_in_executor(
            self.executor, torch_missing, self.settings.python_for_workers
        )
        self.jobs.unavailable = self.torch_problem
        self.jobs.set_devices([] if self.torch_problem else devices)

    # ---- feature state and editor requests ---------------------------------------------------

    def store(self, kind: type[S]) -> S:
        """The one instance of a feature's store (created on first use), typed: features keep
        their state here instead of as attributes patched onto the server."""
        found = self._stores.get(kind)
        if found is None:
            found = self._stores[kind] = kind()
        return cast(S, found)

    async def refresh_code_lenses(self) -> None:
        """Ask the editor to fetch code lenses again (new results), where it supports that."""
        caps = self.client_capabilities
        ws = caps.workspace if caps else None
        if ws and ws.code_lens and ws.code_lens.refresh_support:
            with suppress(Exception):
                await asyncio.wait_for(self.workspace_code_lens_refresh_async(None), 5)

    # ---- messages -----------------------------------------------------------------------------

    def send_status(self, state: str, message: str, speedup: float | None = None) -> None:
        """`stitch/status` for the status bar: idle | running | done | error, and the cluster
        with its free GPUs when one is in use (looked at again after every change of state)."""
        self._last_status = (state, message, speedup)
        self._notify_status()
        if self.cluster.connected:
            with contextlib.suppress(RuntimeError):  # no event loop: nothing to refresh from
                asyncio.get_running_loop().create_task(self._refresh_cluster())

    def _notify_status(self) -> None:
        state, message, speedup = self._last_status
        params = StatusParams(
            state=state,
            message=message,
            speedup=speedup,
            cluster=self.cluster.wire(),
        )
        self.protocol.notify(STATUS_METHOD, params.to_wire(exclude_none=True))

    async def _poll_cluster(self) -> None:
        """Look at the cluster's free GPUs every few seconds while connected: other users and
        finishing jobs change them."""
        while self.cluster.connected:
            await asyncio.sleep(CLUSTER_POLL_S)
            before = self.cluster.wire()
            await self._refresh_cluster(notify=False)
            if self.cluster.wire() != before:
                self._notify_status()

    async def _refresh_cluster(self, notify: bool = True) -> None:
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self.executor, self.cluster.refresh)
        except Exception as exc:
            self.report_error("asking the cluster for its free GPUs", exc)
            return
        if notify:
            self._notify_status()

    def log(self, message: str, kind: lsp.MessageType = lsp.MessageType.Info) -> None:
        self.window_log_message(lsp.LogMessageParams(type=kind, message=message))

    def report_error(self, where: str, exc: BaseException) -> None:
        """Log a feature failure once per (where, type, message); the server keeps serving."""
        key = (where, type(exc).__name__, str(exc)[:200])
        if key in self._errors_seen:
            return
        self._errors_seen.add(key)
        log.error("%s failed", where, exc_info=exc)
        try:
            self.log(
                f"stitch-lsp: {where} failed: {type(exc).__name__}: {exc}", lsp.MessageType.Error
            )
        except Exception:
            log.exception("could not send the log message")

    async def call_provider(
        self, where: str, fn: Callable[..., T | Awaitable[T]], *args: Any, default: T
    ) -> T:
        """Call a provider (sync or async); on any exception log once and return `default`."""
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                result = await result
            return result
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.report_error(where, exc)
            return default

    def _version_of(self, uri: str) -> int | None:
        doc = self.documents.get(uri)
        return doc.version if doc is not None else None


def create_server(
    devices: list[str] | None = None, feature_modules: Sequence[str] | None = None
) -> StitchServer:
    """Build the server with its LSP handlers and every feature module.

    `devices` pins the GPU list (tests); by default GPUs are discovered at `initialized`.
    A feature module that fails to import or register is logged and skipped.
    """
    from stitch_lsp.server.handlers import register_handlers

    server = StitchServer(devices=devices)
    register_handlers(server)
    if feature_modules is None:
        extra = os.environ.get("STITCH_EXTRA_FEATURES", "")
        feature_modules = [*FEATURE_MODULES, *(m.strip() for m in extra.split(",") if m.strip())]
    for name in feature_modules:
        try:
            importlib.import_module(name).register(server)
        except Exception as exc:
            # No client yet: remembered here, sent as a log message at `initialized`.
            log.exception("feature module %s failed to load", name)
            server.load_errors.append(f"{name}: {type(exc).__name__}: {exc}")
    return server
