"""Candidate and reference code runs in bubblewrap (issue 24, item 2 and 6).

The candidate here is hostile at module level, where compile-only verify imports it: it tries
to write beside itself, into the home folder, read a secret from the home folder, see the
host's /tmp, reach a local TCP server, read an API key from its environment, and run a shell
command. Inside the sandbox every one of these fails; with `stitch.sandbox` none (the control)
they succeed, which proves the probe itself works.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from stitch_lsp.models.verify import VerifyRequest, VerifyStatus
from stitch_lsp.runtime.nvcc_flags import FlagRefused, checked_flags
from stitch_lsp.verify.client import run_worker
from stitch_lsp.verify.report import render
from stitch_lsp.workers import sandbox
from stitch_lsp.workers.launch import OWNER_FILE, WORK_PREFIX, remove_stale_folders

pytestmark = pytest.mark.slow  # starts worker processes

DATA = Path(__file__).resolve().parents[1] / "verify" / "data"
NO_BWRAP = sandbox.sandbox_problem()
needs_bwrap = pytest.mark.skipif(NO_BWRAP is not None, reason=f"no sandbox here: {NO_BWRAP}")

HOSTILE = """\
import json, os, socket, subprocess
import torch.nn as nn

seen = {{}}
here = os.path.dirname(os.path.abspath(__file__))
try:
    with open(os.path.join(here, "pwned-workspace"), "w") as f:
        f.write("x")
    seen["wrote_workspace"] = True
except OSError:
    seen["wrote_workspace"] = False
try:
    with open(os.path.expanduser("~/{home_mark}"), "w") as f:
        f.write("x")
except OSError:
    pass
try:
    seen["secret"] = open({secret!r}).read()
except OSError:
    seen["secret"] = None
seen["host_tmp"] = os.path.exists({host_tmp!r})
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=3).close()
    seen["network"] = True
except OSError:
    seen["network"] = False
seen["api_key"] = os.environ.get("OPENAI_API_KEY")
seen["shell"] = subprocess.run(["sh", "-c", "touch {shell_mark}"]).returncode == 0 and \\
    os.path.exists({shell_mark!r})
print("SANDBOX-PROBE " + json.dumps(seen), flush=True)


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()

    def forward(self, x):
        return x
"""


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A workspace with the hostile candidate, a secret in the home folder, a marker in the
    host's /tmp and a TCP listener; everything removed afterwards."""
    tag = uuid.uuid4().hex[:10]
    home = Path.home()
    secret = home / f".stitch-test-secret-{tag}"
    secret.write_text("hunter2")
    host_tmp = Path("/tmp") / f"stitch-host-marker-{tag}"
    host_tmp.write_text("x")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.2)
    ws = tmp_path / "ws"
    ws.mkdir()
    names = {
        "home_mark": f"stitch-home-mark-{tag}",
        "secret": str(secret),
        "host_tmp": str(host_tmp),
        "port": listener.getsockname()[1],
        "shell_mark": str(ws / "pwned-shell"),
    }
    cand = ws / "cand.py"
    cand.write_text(HOSTILE.format(**names))
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-workers")
    yield cand, names, listener
    listener.close()
    for p in (secret, host_tmp, home / names["home_mark"]):
        p.unlink(missing_ok=True)


def _verify(cand: Path, mode: str, *, llm_code: bool = False):
    req = VerifyRequest(
        reference=str(DATA / "ref_bias_relu.py"), candidate=str(cand), compile_only=True
    )
    return run_worker(
        req,
        python=sys.executable,
        env={"CUDA_VISIBLE_DEVICES": ""},
        timeout_s=120,
        cwd=cand.parent,
        sandbox=mode,
        llm_code=llm_code,
    )


def _seen(log_tail: str) -> dict:
    lines = [ln for ln in log_tail.splitlines() if ln.startswith("SANDBOX-PROBE ")]
    assert lines, log_tail[-2000:]
    return json.loads(lines[-1].removeprefix("SANDBOX-PROBE "))


def _accepted(listener: socket.socket) -> bool:
    try:
        conn, _ = listener.accept()
    except (TimeoutError, OSError):
        return False
    conn.close()
    return True


@needs_bwrap
def test_hostile_candidate_is_confined(hostile) -> None:
    cand, names, listener = hostile
    res = _verify(cand, "bwrap", llm_code=True)
    assert res.sandbox == "bwrap", res.message
    seen = _seen(res.log_tail)
    assert seen == {
        "wrote_workspace": False,
        "secret": None,
        "host_tmp": False,
        "network": False,
        "api_key": None,
        "shell": False,
    }
    assert not (cand.parent / "pwned-workspace").exists()
    assert not (cand.parent / "pwned-shell").exists()
    assert not (Path.home() / names["home_mark"]).exists()
    assert not _accepted(listener)
    assert "sandbox: bwrap" in render(res).splitlines()


def test_unconfined_control_shows_the_probe_works(hostile) -> None:
    cand, _, listener = hostile
    res = _verify(cand, "none")
    assert res.sandbox == "not sandboxed: stitch.sandbox is none"
    seen = _seen(res.log_tail)
    assert seen["wrote_workspace"] and seen["shell"] and seen["secret"] == "hunter2"
    assert seen["host_tmp"] and seen["network"]
    # Secrets stay out of every worker, confined or not.
    assert seen["api_key"] is None
    assert _accepted(listener)


def test_llm_code_is_refused_without_a_sandbox(hostile, monkeypatch: pytest.MonkeyPatch) -> None:
    cand, _, _ = hostile
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    res = _verify(cand, "auto", llm_code=True)
    assert res.status is VerifyStatus.runtime_error
    assert "LLM-written code runs only in the sandbox" in res.message
    assert "stitch.sandbox to none" in res.message
    assert not (cand.parent / "pwned-workspace").exists()


def test_auto_without_a_sandbox_runs_workspace_code_and_says_so(
    hostile, monkeypatch: pytest.MonkeyPatch
) -> None:
    cand, _, _ = hostile
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    res = _verify(cand, "auto")
    assert res.sandbox.startswith("not sandboxed: STITCH_BWRAP=/nonexistent/bwrap")
    assert _seen(res.log_tail)["wrote_workspace"] is True


def test_mode_bwrap_without_bwrap_runs_nothing(hostile, monkeypatch: pytest.MonkeyPatch) -> None:
    cand, _, _ = hostile
    monkeypatch.setenv(sandbox.BWRAP_ENV, "/nonexistent/bwrap")
    res = _verify(cand, "bwrap")
    assert "not run: stitch.sandbox is bwrap" in res.message
    assert not (cand.parent / "pwned-workspace").exists()


@needs_bwrap
def test_honest_candidate_gives_the_same_verdict_in_the_sandbox(tmp_path: Path) -> None:
    cand = tmp_path / "cand.py"
    cand.write_text(
        (DATA / "ref_bias_relu.py").read_text().replace("class Model(", "class ModelNew(")
    )
    boxed, free = _verify(cand, "bwrap"), _verify(cand, "none")
    assert boxed.sandbox == "bwrap"
    assert (boxed.status, boxed.phase) == (free.status, free.phase)


# -- workers end with the server ---------------------------------------------------------------

SLEEPER = """\
import os, sys, time
from pathlib import Path
from pydantic import BaseModel
from stitch_lsp.workers.launch import LocalLauncher, WorkerCall

class Req(BaseModel):
    pid_file: str

class Res(BaseModel):
    ok: bool

call = WorkerCall(module=sys.argv[3], request=Req(pid_file=sys.argv[1]), result=Res,
                  timeout_s=600, sandbox=sys.argv[2], env={{"PYTHONPATH": {folder!r}}},
                  writable=(Path(sys.argv[1]).parent,))
LocalLauncher().run(call)
"""

SLEEPER_WORKER = """\
import json, os, sys, time

def main(argv):
    req = json.loads(open(argv[0]).read())
    with open(req["pid_file"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(600)
    return 0
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie waiting for its reaper is gone for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _worker_pids_of(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd.split(b"\0"):
                out.append(int(d.name))
    return out


@pytest.mark.parametrize("mode", ["none", pytest.param("bwrap", marks=needs_bwrap)])
def test_worker_ends_when_the_server_is_killed(tmp_path: Path, mode: str) -> None:
    module = f"sleeper_worker_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(SLEEPER_WORKER)
    script = tmp_path / "server.py"
    script.write_text(SLEEPER.format(folder=str(tmp_path)))
    pid_file = tmp_path / "worker.pid"
    server = subprocess.Popen([sys.executable, str(script), str(pid_file), mode, module])
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pid_file.exists(), "the worker never started"
        pids = _worker_pids_of(module)
        assert pids
        server.send_signal(signal.SIGKILL)
        server.wait()
        deadline = time.monotonic() + 10
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in pids), "the worker outlived the killed server"
    finally:
        server.kill()
        for p in _worker_pids_of(module):
            os.kill(p, signal.SIGKILL)


def test_stale_worker_folders_are_removed(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{WORK_PREFIX}stale"
    stale.mkdir()
    (stale / OWNER_FILE).write_text(str(dead.pid))
    live = tmp_path / f"{WORK_PREFIX}live"
    live.mkdir()
    (live / OWNER_FILE).write_text(str(os.getpid()))
    fresh = tmp_path / f"{WORK_PREFIX}fresh-no-owner"
    fresh.mkdir()
    old = tmp_path / f"{WORK_PREFIX}old-no-owner"
    old.mkdir()
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    other = tmp_path / "unrelated"
    other.mkdir()
    removed = remove_stale_folders(tmp_path)
    assert sorted(p.name for p in removed) == sorted([stale.name, old.name])
    assert live.exists() and fresh.exists() and other.exists()


# -- nvcc flags ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flag",
    [
        ["--run"],
        ["-o", "/tmp/x.so"],
        ["-ccbin=/bin/sh"],
        ["-ccbin", "/bin/sh"],
        ["-Xcompiler", "-wrapper=/bin/sh"],
        ["-Xcompiler=-fplugin=/tmp/p.so"],
        ["-Xlinker=-rpath=/tmp"],
        ["@flags.txt"],
        ["--options-file=flags.txt"],
        ["-odir=/tmp"],
        ["--keep-dir=/tmp"],
        ["-DX=$(id)"],
        ["-O3\n--run"],
    ],
)
def test_nvcc_flags_outside_the_list_are_refused(flag: list[str]) -> None:
    with pytest.raises(FlagRefused, match="is not allowed"):
        checked_flags(flag)


def test_nvcc_flags_a_kernel_needs_are_kept() -> None:
    flags = ["-O3", "--use_fast_math", "-DUSE_VEC4", "-DTILE=32", "-lineinfo", "-Xptxas", "-v"]
    flags += ["-arch=sm_90a", "-std=c++17", "--expt-relaxed-constexpr", "-I/usr/include"]
    assert checked_flags(flags)[-5:] == [
        "-Xptxas=-v",
        "-arch=sm_90a",
        "-std=c++17",
        "--expt-relaxed-constexpr",
        "-I/usr/include",
    ]


def test_load_cuda_refuses_run_before_nvcc(tmp_path: Path) -> None:
    from stitch_lsp.runtime.fastcuda import CudaBuildError, build_cuda

    mark = tmp_path / "ran"
    src = f'#include <cstdio>\nint main() {{ fopen("{mark}", "w"); return 0; }}\n'
    with pytest.raises(CudaBuildError, match="--run"):
        build_cuda(src, name="runner", extra_flags=["--run"])
    assert not mark.exists()


def test_a_hanging_interpreter_probe_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import-folder probe runs the user's chosen interpreter; a wrapper that hangs with a
    child holding its output is killed whole at the timeout, and the answer falls back to the
    interpreter's own folder."""
    marker = tmp_path / f"probe-child-{uuid.uuid4().hex}"
    python = tmp_path / "hanging-python"
    python.write_text(f"#!/bin/sh\nsh -c 'sleep 300; :' {marker} &\nwait\n")
    python.chmod(0o755)
    monkeypatch.setattr(sandbox, "PROBE_TIMEOUT_S", 1.0)
    sandbox.python_paths.cache_clear()
    started = time.monotonic()
    assert sandbox.python_paths(str(python)) == (str(tmp_path),)
    assert time.monotonic() - started < 10
    time.sleep(0.2)
    left = _worker_pids_of(str(marker))
    assert left == [], f"the probe's child is still running: {left}"
