"""The one way a process that touches torch or the GPU is started: request in, result out.

`WorkerLauncher` is the interface (a remote executor implements the same `run`); `LocalLauncher`
runs the worker as a local subprocess:

- `python -E -B [-P] -c BOOTSTRAP` (see `worker_command`): no working folder and no
  `PYTHONPATH` on `sys.path`, this copy of stitch_lsp loaded by path, the server's absolute
  `PYTHONPATH` entries added back explicitly, and no `__pycache__` written beside user files;
- the environment is built once, by `worker_environment`;
- the request and the result travel as JSON files in a private folder (the worker's stdout and
  stderr belong to the code it runs; they go to a log whose tail is kept);
- the worker runs in its own session, so a timeout or a cancel ends its whole process group
  (nvcc, ncu, the candidate and anything it spawned);
- every way it can end badly becomes one `WorkerError` with a kind, the log tail and whatever
  result the worker had written so far.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cache
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from stitch_lsp.workers import sandbox
from stitch_lsp.workers.probe import run_probe

LOG_TAIL_CHARS = 6000
POLL_S = 0.1
TERM_GRACE_S = 2.0
KILL_GRACE_S = 5.0

WORK_PREFIX = "stitch-worker-"
OWNER_FILE = "owner.pid"
"""Each private folder names the server that made it, so a later start can remove the folders
of a server that was killed before it could."""
DEADLINE_ENV = "STITCH_WORKER_DEADLINE"
"""Unix time after which a worker ends itself, should nobody be left to stop it."""
ROOT_ENV = "STITCH_WORKER_ROOT"
"""The folder holding the `stitch_lsp` package the worker must load (the server's own copy)."""
PATH_ENV = "STITCH_WORKER_PATH"
"""Extra absolute import folders for workers: the server's own PYTHONPATH, made explicit."""

# Runs before anything can be imported from the working folder: `sys` is built in, and the first
# statement drops the '' entry that `-c` adds on Pythons without -P.
BOOTSTRAP = """\
import sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]
import importlib, importlib.util, os
extra = [p for p in os.environ.get("STITCH_WORKER_PATH", "").split(os.pathsep) if os.path.isabs(p)]
sys.path[:0] = [p for p in extra if p not in sys.path]
root = os.environ.get("STITCH_WORKER_ROOT", "")
if root:
    pkg = os.path.join(root, "stitch_lsp")
    spec = importlib.util.spec_from_file_location(
        "stitch_lsp", os.path.join(pkg, "__init__.py"), submodule_search_locations=[pkg])
    module = importlib.util.module_from_spec(spec)
    sys.modules["stitch_lsp"] = module
    spec.loader.exec_module(module)
def guard(parent=os.getppid(), deadline=float(os.environ.get("STITCH_WORKER_DEADLINE") or 0)):
    import signal, time
    while True:
        time.sleep(1.0)
        if os.getppid() != parent or (deadline and time.time() > deadline):
            os.killpg(0, signal.SIGKILL)
import threading
threading.Thread(target=guard, name="stitch-worker-guard", daemon=True).start()
name, args = sys.argv[1], sys.argv[2:]
sys.argv = [name, *args]
sys.exit(importlib.import_module(name).main(args))
"""

ResT = TypeVar("ResT", bound=BaseModel)


class WorkerErrorKind(str, Enum):
    cannot_start = "cannot_start"
    crashed = "crashed"
    timeout = "timeout"
    cancelled = "cancelled"
    no_result = "no_result"


class WorkerError(RuntimeError):
    """A worker ended without a usable result. `partial` is the last result it wrote, if any
    (a worker may save its progress, so the caller can say how far it got)."""

    def __init__(
        self,
        kind: WorkerErrorKind,
        message: str,
        *,
        returncode: int | None = None,
        log_tail: str = "",
        partial: BaseModel | None = None,
        seconds: float = 0.0,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.returncode = returncode
        self.log_tail = log_tail
        self.partial = partial
        self.seconds = seconds


@dataclass(frozen=True)
class WorkerCall(Generic[ResT]):
    """One worker run: which module, the request, the result's type, and its limits."""

    module: str
    request: BaseModel
    result: type[ResT]
    timeout_s: float
    python: str | None = None
    """The interpreter (with torch) for the worker; None: the server's own."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Overrides on top of `worker_environment()` (e.g. CUDA_VISIBLE_DEVICES)."""
    cwd: Path | None = None
    """Working folder; None: the run's private folder. Never on sys.path either way."""
    label: str = "worker"
    """How messages name this worker: 'the verify worker'."""
    on_partial: Callable[[dict[str, Any]], None] | None = None
    """Called with the result the worker has saved so far (as JSON data) each time it saves
    one, while it runs; a launcher that cannot see it (a remote one) never calls it."""
    sandbox: str | None = None
    """`stitch.sandbox` (auto, bwrap, none); None: `STITCH_SANDBOX`, else auto."""
    llm_code: bool = False
    """The code it runs came from an LLM: without a sandbox it runs only under mode none."""
    writable: tuple[Path, ...] = ()
    """Folders besides its own scratch folder that the worker writes into (a report folder)."""
    readable: tuple[Path, ...] = ()
    """Files the worker reads that its request does not name (a reference that a generated
    file loads by path): their folders are visible inside the sandbox."""


@dataclass(frozen=True)
class WorkerReply(Generic[ResT]):
    result: ResT
    log_tail: str
    seconds: float
    where: str | None = None
    """Where it ran when that was not this machine: a cluster node and its GPU."""
    sandbox: str = ""
    """'bwrap' when it ran confined, else why not ('not sandboxed: ...')."""


class WorkerLauncher(Protocol):
    """Runs a worker to completion. Raises WorkerError for every way it can fail.

    A remote launcher (`remote = True`, e.g. `stitch_lsp.cluster.executor.RayLauncher`) places
    GPU jobs on its own GPUs: callers then leave CUDA_VISIBLE_DEVICES to it.
    """

    def run(
        self, call: WorkerCall[ResT], cancel: threading.Event | None = None
    ) -> WorkerReply[ResT]: ...

    def kill_all(self) -> None:
        """Last resort at server exit: end every worker still running."""
        ...


def package_root() -> Path:
    """The folder that holds the `stitch_lsp` package this process runs."""
    return Path(__file__).resolve().parents[2]


def worker_environment(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every worker: this process's, plus where stitch_lsp and the server's
    PYTHONPATH entries are (workers ignore PYTHONPATH itself), plus `overrides`."""
    env = {**os.environ, **(overrides or {})}
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    env[ROOT_ENV] = (overrides or {}).get(ROOT_ENV) or str(package_root())
    env[PATH_ENV] = os.pathsep.join(extra)
    return env


def worker_command(python: str | None, module: str, args: list[str]) -> list[str]:
    """The isolated command line that runs `module.main(args)` with `python`."""
    exe = python or sys.executable
    safe_path = ["-P"] if supports_safe_path(exe) else []
    # -B: importing the user's file by path must not leave a __pycache__ beside it.
    return [exe, "-E", "-u", "-B", *safe_path, "-c", BOOTSTRAP, module, *args]


@cache
def supports_safe_path(python: str) -> bool:
    """Whether `python` takes -P (3.11+). Without it the bootstrap drops '' itself."""
    if python == sys.executable:
        return sys.version_info >= (3, 11)
    try:
        out = run_probe([python, "-E", "-c", "import sys; print(sys.version_info >= (3, 11))"], 30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.stdout.strip() == "True"


class LocalLauncher:
    """Workers as local subprocesses, each in its own process group."""

    def __init__(self) -> None:
        self._live: set[subprocess.Popen[bytes]] = set()
        self._lock = threading.Lock()

    def run(
        self, call: WorkerCall[ResT], cancel: threading.Event | None = None
    ) -> WorkerReply[ResT]:
        started = time.perf_counter()
        with tempfile.TemporaryDirectory(prefix=WORK_PREFIX) as tmp:
            folder = Path(tmp)
            (folder / OWNER_FILE).write_text(str(os.getpid()), encoding="utf-8")
            req_path, res_path, log_path = (
                folder / "request.json",
                folder / "result.json",
                folder / "worker.log",
            )
            request = _with_report_folder(call.request)
            req_path.write_text(request.model_dump_json(), encoding="utf-8")
            python = call.python or sys.executable
            if shutil.which(python) is None:  # inside a sandbox it would only exit with 1
                raise WorkerError(
                    WorkerErrorKind.cannot_start,
                    f"cannot start {call.label} ({python}): no such executable",
                )
            argv = worker_command(python, call.module, [str(req_path), str(res_path)])
            env = worker_environment(call.env)
            cwd = Path(call.cwd or folder)
            try:
                box = sandbox.confinement(
                    sandbox.configured_mode(call.sandbox),
                    llm_code=call.llm_code,
                    python=python,
                    scratch=folder,
                    request=request.model_dump(mode="json"),
                    cwd=cwd,
                    writable=call.writable,
                    readable=call.readable,
                    env=env,
                )
            except sandbox.SandboxRefused as exc:
                raise WorkerError(WorkerErrorKind.cannot_start, str(exc)) from None
            env = sandbox.sandbox_environment(env, folder, box.confined)
            env[DEADLINE_ENV] = f"{time.time() + call.timeout_s + TERM_GRACE_S + KILL_GRACE_S:.0f}"
            with open(log_path, "wb") as log:
                try:
                    proc = subprocess.Popen(
                        [*box.prefix, *argv],
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        env=env,
                        cwd=str(cwd),
                        start_new_session=True,
                    )
                except OSError as exc:
                    raise WorkerError(
                        WorkerErrorKind.cannot_start,
                        f"cannot start {call.label} ({python}): {exc}",
                    ) from exc
                with self._lock:
                    self._live.add(proc)
                try:
                    watch = _PartialWatch(res_path, call.on_partial)
                    ended = _wait(proc, call.timeout_s, cancel, watch)
                finally:
                    with self._lock:
                        self._live.discard(proc)
            seconds = time.perf_counter() - started
            tail = _tail(log_path)
            result, problem = _read_result(res_path, call.result)
        if ended == "exited" and proc.returncode == 0 and result is not None:
            return WorkerReply(result, tail, seconds, sandbox=box.note)
        kind, message = _failure(call, ended, proc.returncode, problem)
        raise WorkerError(
            kind,
            message,
            returncode=proc.returncode,
            log_tail=tail,
            partial=result,
            seconds=seconds,
        )

    def kill_all(self) -> None:
        with self._lock:
            live = list(self._live)
        for proc in live:
            _signal_group(proc, signal.SIGKILL)


def _with_report_folder(request: BaseModel) -> BaseModel:
    """A request whose worker writes a report (`report_dir`) but names no folder gets a fresh one
    here, outside the worker's private folder: the report outlives the worker (and its sandbox,
    whose /tmp is its own)."""
    if (
        "report_dir" not in type(request).model_fields
        or getattr(request, "report_dir", None) is not None
    ):
        return request
    return request.model_copy(update={"report_dir": tempfile.mkdtemp(prefix="ncu-")})


def _failure(
    call: WorkerCall[ResT], ended: str, code: int | None, problem: str
) -> tuple[WorkerErrorKind, str]:
    if ended == "timeout":
        return WorkerErrorKind.timeout, (
            f"{call.label} timed out after {call.timeout_s:g} s and was stopped"
        )
    if ended == "cancelled":
        return WorkerErrorKind.cancelled, "cancelled"
    if code:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return WorkerErrorKind.crashed, f"{call.label} {how}"
    return WorkerErrorKind.no_result, f"{call.label} wrote no result ({problem})"


class _PartialWatch:
    """Reads a worker's result file when its mtime moves, and hands the data on."""

    def __init__(self, path: Path, on_partial: Callable[[dict[str, Any]], None] | None) -> None:
        self.path = path
        self.on_partial = on_partial
        self.mtime = 0

    def __call__(self) -> None:
        if self.on_partial is None:
            return
        try:
            mtime = self.path.stat().st_mtime_ns
            if mtime == self.mtime:
                return
            self.mtime = mtime
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # not there yet, or caught mid-write
            return
        if isinstance(data, dict):
            self.on_partial(data)


def _wait(
    proc: subprocess.Popen[bytes],
    timeout_s: float,
    cancel: threading.Event | None,
    watch: Callable[[], None] = lambda: None,
) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        watch()
        try:
            proc.wait(timeout=POLL_S)
            _signal_group(proc, signal.SIGKILL)  # anything it left running in its group
            return "exited"
        except subprocess.TimeoutExpired:
            pass
        if cancel is not None and cancel.is_set():
            _stop(proc)
            return "cancelled"
        if time.monotonic() > deadline:
            _stop(proc)
            return "timeout"


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the group (ncu and nvcc clean up), SIGKILL whatever is left after a grace."""
    _signal_group(proc, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=TERM_GRACE_S)
    _signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=KILL_GRACE_S)


def _signal_group(proc: subprocess.Popen[Any], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _tail(path: Path, limit: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - limit))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _read_result(path: Path, model: type[ResT]) -> tuple[ResT | None, str]:
    try:
        data = path.read_bytes()
    except OSError:
        return None, "no result file"
    try:
        return TypeAdapter(model).validate_json(data), ""
    except ValidationError as exc:
        return None, f"unreadable result: {str(exc).splitlines()[0]}"


def remove_stale_folders(root: Path | None = None, min_age_s: float = 3600.0) -> list[Path]:
    """Remove private folders left by servers that died (SIGKILL leaves them): a folder whose
    owner process is gone, or an old one with no owner file. Returns what was removed."""
    base = root or Path(tempfile.gettempdir())
    removed: list[Path] = []
    try:
        folders = [p for p in base.iterdir() if p.name.startswith(WORK_PREFIX)]
    except OSError:
        return removed
    for folder in folders:
        try:
            info = folder.lstat()
            if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
                continue
            owner = _owner(folder / OWNER_FILE)
            if owner is None and time.time() - info.st_mtime < min_age_s:
                continue
            if owner is not None and _alive(owner):
                continue
        except OSError:
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed


def _owner(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_default: WorkerLauncher = LocalLauncher()


def default_launcher() -> WorkerLauncher:
    """The launcher every worker uses unless it is given another one."""
    return _default


def set_default_launcher(launcher: WorkerLauncher) -> WorkerLauncher:
    """Use `launcher` (e.g. a remote executor) from now on; returns the previous one."""
    global _default
    previous, _default = _default, launcher
    return previous


def is_remote(launcher: WorkerLauncher | None = None) -> bool:
    """Whether `launcher` (default: the default launcher) runs workers on other machines."""
    return bool(getattr(launcher or _default, "remote", False))


def run_worker(
    call: WorkerCall[ResT],
    cancel: threading.Event | None = None,
    launcher: WorkerLauncher | None = None,
) -> WorkerReply[ResT]:
    """Run `call` with `launcher` (default: the default launcher)."""
    return (launcher or _default).run(call, cancel)
