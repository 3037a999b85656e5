"""A raw JSON-RPC client over the server's stdio: it writes whatever bytes a test wants (broken
framing included) and reads framed replies, so the fuzzer sees exactly what an editor would."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def frame(payload: Any, length: int | None = None) -> bytes:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    n = len(body) if length is None else length
    return f"Content-Length: {n}\r\n\r\n".encode() + body


class RawServer:
    """`python -m stitch_lsp serve` with a reader thread that collects framed messages."""

    def __init__(self, cwd: Path, env: dict[str, str] | None = None) -> None:
        full_env = {**os.environ, "STITCH_LOG_LEVEL": "WARNING", **(env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stitch_lsp", "serve"],
            cwd=cwd,
            env=full_env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr_lines: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        self._next_id = 1000

    def _read_stdout(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                elif line in (b"\r\n", b"\n") and length is not None:
                    break
            body = out.read(length)
            self.messages.put(json.loads(body))

    def _read_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        for line in err:
            self.stderr_lines.append(line.decode("utf-8", "replace"))

    # -- writing --------------------------------------------------------------------------
    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, payload: Any, length: int | None = None) -> None:
        self.write(frame(payload, length))

    def request(self, method: str, params: Any = None, msg_id: Any = None) -> Any:
        if msg_id is None:
            self._next_id += 1
            msg_id = self._next_id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return msg_id

    def notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    # -- reading --------------------------------------------------------------------------
    def wait_for(self, predicate: Any, timeout: float = 20.0) -> dict[str, Any]:
        for msg in self.seen:
            if predicate(msg):
                self.seen.remove(msg)
                return msg
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no matching message in {timeout} s; stderr: {self.stderr()}")
            try:
                msg = self.messages.get(timeout=left)
            except queue.Empty:
                continue
            if predicate(msg):
                return msg
            self.seen.append(msg)

    def response(self, msg_id: Any, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m, timeout=timeout)

    def call(self, method: str, params: Any = None, timeout: float = 20.0) -> dict[str, Any]:
        return self.response(self.request(method, params), timeout)

    def drain(self) -> list[dict[str, Any]]:
        """Every message received so far (seen or queued)."""
        out = list(self.seen)
        self.seen.clear()
        while True:
            try:
                out.append(self.messages.get_nowait())
            except queue.Empty:
                return out

    def answer_server_requests(self) -> None:
        """Reply null to the server's own requests (configuration, registration, progress)."""
        for msg in self.drain():
            if "method" in msg and "id" in msg:
                self.send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            else:
                self.seen.append(msg)

    def stderr(self) -> str:
        return "".join(self.stderr_lines[-40:])

    # -- lifecycle ------------------------------------------------------------------------
    def initialize(self, root: Path, settings: dict[str, Any] | None = None) -> dict[str, Any]:
        reply = self.call(
            "initialize",
            {
                "processId": None,
                "rootUri": root.as_uri(),
                "capabilities": {},
                "initializationOptions": {"settings": settings or {}, "trusted": True},
            },
        )
        self.notify("initialized", {})
        return reply

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self, timeout: float = 10.0) -> int:
        if self.proc.poll() is None:
            try:
                self.request("shutdown")
                self.notify("exit")
            except (BrokenPipeError, OSError):
                pass
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()
        finally:
            for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
                if f is not None:
                    with contextlib.suppress(OSError):
                        f.close()
