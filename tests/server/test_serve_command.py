"""`stitch-lsp serve --tcp`: the same server over a socket."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _request(sock: socket.socket, msg_id: int, method: str, params: dict) -> dict:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    data = body.encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(data) + data)
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            buf += sock.recv(65536)
        header, _, rest = buf.partition(b"\r\n\r\n")
        length = int(next(h for h in header.split(b"\r\n") if h.startswith(b"Content-Length"))
                     .split(b":")[1])  # fmt: skip
        while len(rest) < length:
            rest += sock.recv(65536)
        msg, buf = json.loads(rest[:length]), rest[length:]
        if msg.get("id") == msg_id:
            return msg


def test_tcp_initialize() -> None:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "stitch_lsp", "serve", "--tcp", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", port), timeout=30)
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "the server never listened"
                time.sleep(0.1)
        with sock:
            reply = _request(sock, 1, "initialize", {"processId": None, "rootUri": None,
                                                     "capabilities": {}})  # fmt: skip
            caps = reply["result"]["capabilities"]
            assert reply["result"]["serverInfo"]["name"] == "stitch-lsp"
            assert caps["textDocumentSync"]["change"] == 2  # incremental
            assert caps["hoverProvider"] and caps["documentSymbolProvider"]
    finally:
        proc.terminate()
        proc.wait(10)


def test_help_lists_serve() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert "--tcp" in out.stdout and "--log-level" in out.stdout
