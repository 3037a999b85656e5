"""The server ends with its editor: at the end of its stdin, when the process that started it
dies, and when the `processId` named in `initialize` dies; its workers end with it."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest

from stitch_lsp.server.lifeline import Lifeline, process_exists

REPO = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "stitch_lsp", "serve"]
# Starts the server as its child, writes the child's pid to argv[1], and waits for it.
INTERMEDIATE = (
    "import subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[2:])\n"
    "open(sys.argv[1], 'w').write(str(p.pid))\n"
    "sys.exit(p.wait())\n"
)


def _env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "STITCH_EXTRA_FEATURES": "tests.server.fake_feature",
        "STITCH_LOG_LEVEL": "WARNING",
    }


def _gone(pid: int) -> bool:
    """Whether `pid` has ended (a zombie nobody reaped counts as ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


def _wait_gone(pid: int, timeout: float) -> float:
    """Seconds until `pid` ended; AssertionError after `timeout`."""
    start = time.monotonic()
    while not _gone(pid):
        assert time.monotonic() - start < timeout, f"process {pid} still runs after {timeout} s"
        time.sleep(0.1)
    return time.monotonic() - start


class Wire:
    """LSP over a pair of pipes the test holds (so closing them is the test's choice)."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self._in = stdin
        self._out = stdout
        self._messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self._next = 0
        self._seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            length = None
            while True:
                line = self._out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                elif line.strip() == b"" and length is not None:
                    break
            self._messages.put(json.loads(self._out.read(length)))

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self._in.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self._in.flush()

    def call(self, method: str, params: Any, timeout: float = 60) -> dict[str, Any]:
        self._next += 1
        msg_id = self._next
        self.send({"id": msg_id, "method": method, "params": params})
        deadline = time.monotonic() + timeout
        while True:
            msg = self._messages.get(timeout=max(0.1, deadline - time.monotonic()))
            if msg.get("id") == msg_id and "method" not in msg:
                return msg
            if "method" in msg and "id" in msg:  # the server's own requests: answer null
                self.send({"id": msg["id"], "result": None})
            else:
                self._seen.append(msg)

    def logs(self) -> list[str]:
        """The log messages the server sent so far."""
        while True:
            try:
                self._seen.append(self._messages.get_nowait())
            except queue.Empty:
                break
        return [
            m["params"]["message"] for m in self._seen if m.get("method") == "window/logMessage"
        ]

    def initialize(self, root: Path, process_id: int | None = None) -> None:
        params = {
            "processId": process_id,
            "rootUri": root.as_uri(),
            "capabilities": {},
            "initializationOptions": {"trusted": True},
        }
        assert "result" in self.call("initialize", params)
        self.send({"method": "initialized", "params": {}})


def _start_job(wire: Wire, tmp_path: Path) -> int:
    """Start the fake feature's 60 s job whose worker starts a grandchild; its pid."""
    pid_file = tmp_path / "grandchild.pid"
    uri = (tmp_path / "a.py").as_uri()
    args = [uri, 60, False, str(pid_file)]
    wire.send({"id": 999, "method": "workspace/executeCommand",
               "params": {"command": "test.job", "arguments": args}})  # fmt: skip
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the job's worker never started"
        time.sleep(0.1)
    return int(pid_file.read_text())


@pytest.fixture
def server(tmp_path: Path):
    proc = subprocess.Popen(
        SERVE, env=_env(), cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    try:
        yield proc, Wire(proc.stdin, proc.stdout)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)


@pytest.mark.slow
def test_end_of_stdin_ends_the_server_and_its_workers(server: Any, tmp_path: Path) -> None:
    proc, wire = server
    wire.initialize(tmp_path)
    grandchild = _start_job(wire, tmp_path)
    proc.stdin.close()
    proc.wait(5)
    _wait_gone(grandchild, 5)


@pytest.mark.slow
def test_the_death_of_the_parent_process_ends_the_server(tmp_path: Path) -> None:
    """The editor is killed and its pipes stay open (a child holds them): the server notices
    that its parent is gone, and kills its workers."""
    pid_file = tmp_path / "server.pid"
    parent = subprocess.Popen(
        [sys.executable, "-c", INTERMEDIATE, str(pid_file), *SERVE], env=_env(), cwd=tmp_path,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    assert parent.stdin is not None and parent.stdout is not None
    wire = Wire(parent.stdin, parent.stdout)
    server_pid = 0
    try:
        wire.initialize(tmp_path)  # no processId: only the parent tells
        server_pid = int(pid_file.read_text())
        grandchild = _start_job(wire, tmp_path)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _wait_gone(server_pid, 15) < 15
        _wait_gone(grandchild, 5)
    finally:
        if server_pid and not _gone(server_pid):
            os.kill(server_pid, signal.SIGKILL)
        parent.stdin.close()


@pytest.mark.slow
def test_the_death_of_the_process_named_in_initialize_ends_the_server(
    server: Any, tmp_path: Path
) -> None:
    proc, wire = server
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        wire.initialize(tmp_path, process_id=editor.pid)
        time.sleep(3)
        assert proc.poll() is None  # the editor lives: so does the server
        editor.kill()
        editor.wait(10)
        proc.wait(15)
    finally:
        if editor.poll() is None:
            editor.kill()


@pytest.mark.slow
def test_a_process_id_that_is_not_a_process_here_is_not_watched(
    server: Any, tmp_path: Path
) -> None:
    """Another PID namespace (the editor on the host, the server in a container): the server
    says so and lives on instead of exiting at once."""
    proc, wire = server
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(10)
    wire.initialize(tmp_path, process_id=dead.pid)
    assert "result" in wire.call("shutdown", None)
    assert proc.poll() is None
    assert any(f"processId {dead.pid}" in m for m in wire.logs())


def test_the_lifeline_reports_each_way_the_editor_goes() -> None:
    fired: list[str] = []
    lifeline = Lifeline(fired.append, poll_s=0.05)
    assert lifeline.check() is None
    for bad in (None, 0, -1, True, "123", os.getpid(), 2**40):
        result = lifeline.watch_editor(bad)
        assert lifeline.check() is None, bad  # nothing watched from a bad value
        assert result is None or "not a process here" in result
    editor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    assert lifeline.watch_editor(editor.pid) is None
    lifeline.start()
    time.sleep(0.2)
    assert fired == []
    editor.kill()
    editor.wait(10)
    deadline = time.monotonic() + 5
    while not fired and time.monotonic() < deadline:
        time.sleep(0.05)
    assert fired and f"process {editor.pid} has ended" in fired[0]
    assert process_exists(os.getpid()) and not process_exists(editor.pid)
