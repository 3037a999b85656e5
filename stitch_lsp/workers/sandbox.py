"""Where candidate and reference code runs: inside bubblewrap, or (only when allowed) unconfined.

Every worker imports the user's reference or a candidate (the Coder's, the LLM's, or the
user's own), so every local worker starts inside one `bwrap` invocation built here:

- no network (`--unshare-all`: net, pid, ipc, uts, cgroup and user namespaces);
- the whole system read-only (`--ro-bind / /`), with `/tmp`, `/var/tmp` and `/run` (sockets
  such as Docker's or ssh-agent's) replaced by empty private folders;
- the home folder hidden behind an empty tmpfs, with only what the worker needs bound back
  read-only: this copy of stitch_lsp, the worker Python's prefix and import folders, PATH
  entries, and the folders of the files its request names;
- writable: the job's private folder (request, result, log, TMPDIR), folders the request says
  the worker writes into (`report_dir`), and stitch-lsp's own build caches (nvcc libraries,
  load_inline extensions, Inductor and Triton), kept under the stitch-lsp cache folder rather
  than the user's general caches;
- the GPU's device nodes (`/dev/nvidia*`) bound in, so CUDA, cuBLAS and ncu work;
- `--die-with-parent`: the sandbox ends with the server, even after a SIGKILL.

Secrets in the environment (API keys, tokens, agent sockets) never reach a worker, sandboxed or
not. Mode `auto` runs workspace code unconfined where bwrap cannot start, and says so in the
result; LLM output then is refused unless the user set `stitch.sandbox` to `none`.
"""

from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

from stitch_lsp.workers.probe import run_probe

SandboxMode = Literal["auto", "bwrap", "none"]
BWRAP_ENV = "STITCH_BWRAP"
"""Path of the bwrap binary to use instead of the one on PATH."""
MODE_ENV = "STITCH_SANDBOX"
PROBE_TIMEOUT_S = 20.0

DIR_KEYS = frozenset({"report_dir"})
"""Request fields naming a folder the worker writes into (as the cluster transfer names them)."""

SECRET_NAME = re.compile(
    r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|COOKIE|SESSION)S?$|^(AWS|AZURE|GCP|GOOGLE)_"
    r"|^(SSH_AUTH_SOCK|SSH_AGENT_PID|GPG_AGENT_INFO|DBUS_SESSION_BUS_ADDRESS|KRB5CCNAME)$",
    re.IGNORECASE,
)
"""Environment variables a worker never sees."""
KEEP_NAMES = frozenset({"STITCH_LOOP_WATCHDOG"})


class SandboxRefused(RuntimeError):
    """The code may not run: no sandbox can start here and the settings do not allow it without."""


@dataclass(frozen=True)
class Confinement:
    """How one worker is started: the command prefix and the words the result uses for it."""

    prefix: list[str]
    confined: bool
    note: str
    """'bwrap' when confined; otherwise why not, e.g. 'not sandboxed: bwrap not found'."""


def configured_mode(value: str | None = None) -> SandboxMode:
    """The mode: the given setting, else `STITCH_SANDBOX`, else auto. Unknown words mean auto."""
    raw = (value or os.environ.get(MODE_ENV) or "auto").strip().lower()
    return raw if raw in ("auto", "bwrap", "none") else "auto"  # type: ignore[return-value]


def bwrap_path() -> str | None:
    env = os.environ.get(BWRAP_ENV)
    if env:
        return env if os.access(env, os.X_OK) else None
    return shutil.which("bwrap")


@cache
def bwrap_problem(path: str) -> str | None:
    """None when `path` can build this module's sandbox here; otherwise bwrap's own reason."""
    argv = [path, *_base_args(), "--", "/bin/true"]
    try:
        proc = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not start: {exc}"
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr or "").splitlines() if ln.strip()]
        return f"bwrap cannot create its namespaces here: {lines[-1] if lines else proc.returncode}"
    return None


def sandbox_problem() -> str | None:
    """Why no sandbox can start on this machine, or None when it can."""
    path = bwrap_path()
    if path is None:
        where = os.environ.get(BWRAP_ENV)
        return (
            f"{BWRAP_ENV}={where} is not an executable"
            if where
            else "bwrap (bubblewrap) is not installed: apt-get install bubblewrap"
        )
    return bwrap_problem(path)


def confinement(
    mode: SandboxMode,
    *,
    llm_code: bool,
    python: str,
    scratch: Path,
    request: Mapping[str, Any],
    cwd: Path,
    writable: Iterable[Path] = (),
    readable: Iterable[Path] = (),
    env: Mapping[str, str],
) -> Confinement:
    """The bwrap prefix for one worker, or the unconfined answer with its reason.

    Raises SandboxRefused when the code may not run at all: mode `bwrap` without a working
    bwrap, or LLM output under `auto` without one."""
    if mode == "none":
        return Confinement([], False, "not sandboxed: stitch.sandbox is none")
    problem = sandbox_problem()
    if problem is not None:
        if mode == "bwrap":
            raise SandboxRefused(f"not run: stitch.sandbox is bwrap, but {problem}")
        if llm_code:
            raise SandboxRefused(
                f"not run: LLM-written code runs only in the sandbox, and {problem}. Install "
                "bubblewrap, or set stitch.sandbox to none in your user settings to run it "
                "unconfined"
            )
        return Confinement([], False, f"not sandboxed: {problem}")
    path = bwrap_path()
    assert path is not None
    visible = {**request, "_readable": [str(p) for p in readable]}
    args = [path, *_base_args(), *_visible_args(python, visible, cwd, env)]
    named = [Path(v) for k, v in request.items() if k in DIR_KEYS and _absolute(v)]
    for folder in [scratch, *writable, *named, *cache_folders(env).values()]:
        folder.mkdir(parents=True, exist_ok=True)
        args += ["--bind", str(folder), str(folder)]
    args += _device_args()
    args += ["--chdir", str(cwd)]
    return Confinement(args, True, "bwrap")


def _absolute(value: object) -> bool:
    return isinstance(value, str) and value.startswith("/") and "\0" not in value


def cache_folders(env: Mapping[str, str]) -> dict[str, Path]:
    """Writable caches inside the sandbox, by the variable that points each tool at its own."""
    raw = env.get("STITCH_CACHE_DIR")
    build = Path(raw).expanduser() if raw else Path.home() / ".cache" / "stitch-lsp" / "build"
    root = build.parent / "sandbox"
    return {
        "STITCH_CACHE_DIR": build,
        "TORCH_EXTENSIONS_DIR": root / "torch_extensions",
        "TORCHINDUCTOR_CACHE_DIR": root / "inductor",
        "TRITON_CACHE_DIR": root / "triton",
    }


def sandbox_environment(env: Mapping[str, str], scratch: Path, confined: bool) -> dict[str, str]:
    """`env` without secrets; when confined, caches and TMPDIR pointed inside the sandbox."""
    out = {k: v for k, v in env.items() if k in KEEP_NAMES or not SECRET_NAME.search(k)}
    if confined:
        tmp = scratch / "tmp"
        tmp.mkdir(exist_ok=True)
        out["TMPDIR"] = str(tmp)
        for name, folder in cache_folders(env).items():
            out[name] = str(folder)
    return out


def _base_args() -> list[str]:
    return [
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--tmpfs",
        "/var/tmp",
        "--tmpfs",
        "/run",
        "--unshare-all",
        "--die-with-parent",
    ]


def _device_args() -> list[str]:
    """The GPU's device nodes: /dev/nvidia0.., nvidiactl, nvidia-uvm(-tools), nvidia-caps/."""
    args: list[str] = []
    for node in sorted(Path("/dev").glob("nvidia*")):
        args += ["--dev-bind", str(node), str(node)]
    return args


HIDDEN = ("/tmp", "/var/tmp", "/run")
"""Replaced by empty folders inside the sandbox, besides the home folder."""


def _hidden_roots() -> list[Path]:
    roots = [Path(p) for p in HIDDEN]
    home = _home()
    return [*roots, home] if home is not None else roots


def _visible_args(
    python: str, request: Mapping[str, Any], cwd: Path, env: Mapping[str, str]
) -> list[str]:
    """Hide the home folder; bind back read-only, inside it and the hidden temporary folders,
    what the worker must read: its Python, this package, PATH entries, the request's files."""
    home = _home()
    needed = {Path(p) for p in python_paths(python)}
    needed.add(_package_root())
    for var in ("PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH", "STITCH_WORKER_PATH"):
        needed.update(Path(p) for p in env.get(var, "").split(os.pathsep) if os.path.isabs(p))
    for var in ("STITCH_NVCC", "STITCH_WORKER_ROOT"):
        if os.path.isabs(env.get(var, "")):
            needed.add(Path(env[var]).parent)
    needed.update(_request_folders(request, _hidden_roots()))
    needed.add(cwd)
    args = ["--tmpfs", str(home)] if home is not None else []
    for path in sorted(_inside(needed, _hidden_roots()), key=lambda p: len(p.parts)):
        args += ["--ro-bind-try", str(path), str(path)]
    return args


def _home() -> Path | None:
    raw = os.environ.get("HOME")
    if not raw or not os.path.isabs(raw):
        return None
    home = Path(raw).resolve()
    # Never hide '/' or a system folder that holds what the worker runs.
    return home if len(home.parts) > 1 and str(home) not in ("/usr", "/opt", "/etc") else None


def _inside(paths: Iterable[Path], roots: list[Path]) -> list[Path]:
    """Those of `paths` (and their resolved targets) strictly inside one of the hidden `roots`
    (binding a root itself, or a folder above it, would undo the hiding)."""
    out: set[Path] = set()
    for p in paths:
        for q in {p, _resolved(p)}:
            if q is not None and any(r in q.parents for r in roots):
                out.add(q)
    # A folder already bound makes its sub-folders redundant.
    return [p for p in out if not any(a in p.parents for a in out)]


def _resolved(p: Path) -> Path | None:
    try:
        return p.resolve()
    except (OSError, RuntimeError):
        return None


def _request_folders(request: Mapping[str, Any], roots: list[Path]) -> set[Path]:
    """The folders of the absolute paths a request names (the reference, the candidate, ncu):
    a file's folder, or the file alone when its folder is a hidden root itself."""
    out: set[Path] = set()

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                visit(v)
        elif isinstance(value, list):
            for v in value:
                visit(v)
        elif isinstance(value, str) and value.startswith("/") and "\0" not in value:
            p = Path(value)
            for q in {p, _resolved(p) or p}:
                if q.is_dir():
                    out.add(q)
                elif q.exists():
                    out.add(q.parent if q.parent not in roots else q)

    visit(dict(request))
    return out


def _package_root() -> Path:
    return Path(__file__).resolve().parents[2]


def interpreter_paths() -> list[str]:
    """Run inside the interpreter in question (its source is sent to other Pythons)."""
    import os
    import sys

    out = [os.path.dirname(sys.executable), sys.prefix, sys.base_prefix]
    out += [p for p in sys.path if p]
    for name, mod in list(sys.modules.items()):
        mapping = getattr(mod, "MAPPING", None)  # setuptools' editable-install finders
        if name.startswith("__editable__") and isinstance(mapping, dict):
            out += [os.path.dirname(str(v)) for v in mapping.values()]
    return out


@cache
def python_paths(python: str) -> tuple[str, ...]:
    """What `python` reads: its executable's folder, prefixes, import folders, editable
    installs' source folders. Asked once per interpreter; the server's own is known."""
    if python == sys.executable:
        return tuple(interpreter_paths())
    script = (
        inspect.getsource(interpreter_paths)
        + "import json\nprint(json.dumps(interpreter_paths()))\n"
    )
    try:
        proc = run_probe([python, "-E", "-c", script], PROBE_TIMEOUT_S)
        data = json.loads(proc.stdout or "[]")
    except (OSError, subprocess.TimeoutExpired, ValueError):
        data = []
    paths = [str(p) for p in data if isinstance(p, str)] if isinstance(data, list) else []
    return (*paths, str(Path(python).parent))
