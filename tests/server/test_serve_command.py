"""`stitch-lsp serve --tcp`: the same server over a loopback socket, for one client holding the
token the server was started with."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts server processes

TOKEN = "s3cret-token-for-the-test"
INIT = {"processId": None, "rootUri": None, "capabilities": {}}


def _serve(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "stitch_lsp", "serve", "--tcp", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _refused(*args: str) -> str:
    """What `serve --tcp ARGS` says when it refuses to start (exit code 2)."""
    out = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "serve", "--tcp", *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr
    return out.stderr


def _port(proc: subprocess.Popen[bytes]) -> int:
    """The port from the server's `listening on` line (it was started with --port 0)."""
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode()
        m = re.search(r"listening on \S+ port (\d+)", line)
        if m:
            return int(m.group(1))
        assert line or proc.poll() is None, "the server exited before listening"
    raise AssertionError("the server never said where it listens")


def _send(sock: socket.socket, msg_id: int, method: str, params: dict) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    data = body.encode()
    sock.sendall(b"Content-Length: %d\r\n\r\n" % len(data) + data)


def _reply(sock: socket.socket, msg_id: int) -> dict:
    """The reply to request `msg_id`; AssertionError if the connection closes first."""
    buf = b""
    while True:
        while b"\r\n\r\n" not in buf:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            buf += chunk
        header, _, rest = buf.partition(b"\r\n\r\n")
        length = int(re.search(rb"Content-Length: *(\d+)", header).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            chunk = sock.recv(65536)
            assert chunk, "the server closed the connection"
            rest += chunk
        msg, buf = json.loads(rest[:length]), rest[length:]
        if msg.get("id") == msg_id:
            return msg


def _closed(sock: socket.socket) -> bool:
    """Whether the server closed its end (reads give EOF or a reset)."""
    sock.settimeout(10)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    return True


@pytest.fixture
def server() -> Iterator[tuple[subprocess.Popen[bytes], int]]:
    proc = _serve("--port", "0", "--token", TOKEN)
    try:
        yield proc, _port(proc)
    finally:
        if proc.poll() is None:
            proc.terminate()
        proc.wait(10)


def _connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=30)


def test_without_a_token_it_refuses_to_start_and_says_how_to_give_one() -> None:
    message = _refused("--port", "0")
    assert "needs a token" in message and "--token-file" in message and "--token " in message


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com"])
def test_a_host_that_is_not_loopback_is_refused(host: str) -> None:
    message = _refused("--host", host, "--port", "0", "--token", TOKEN)
    assert "loopback" in message and host in message


def test_a_token_file_others_can_read_is_refused(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o644)
    message = _refused("--port", "0", "--token-file", str(token_file))
    assert "0644" in message and "chmod 600" in message
    link = tmp_path / "link"
    link.symlink_to(token_file)
    token_file.chmod(0o600)
    assert "cannot open" in _refused("--port", "0", "--token-file", str(link))
    assert "not a regular file" in _refused("--port", "0", "--token-file", str(tmp_path))


def test_a_private_token_file_is_accepted(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, (TOKEN + "\n").encode())
    os.close(fd)
    proc = _serve("--port", "0", "--token-file", str(token_file))
    try:
        with _connect(_port(proc)) as sock:
            _send(sock, 1, "initialize", {**INIT, "initializationOptions": {"token": TOKEN}})
            assert _reply(sock, 1)["result"]["serverInfo"]["name"] == "stitch-lsp"
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_right_token_gets_the_server(server: tuple[subprocess.Popen[bytes], int]) -> None:
    proc, port = server
    with _connect(port) as sock:
        _send(sock, 1, "initialize", {**INIT, "initializationOptions": {"token": TOKEN}})
        reply = _reply(sock, 1)
        caps = reply["result"]["capabilities"]
        assert reply["result"]["serverInfo"]["name"] == "stitch-lsp"
        assert caps["textDocumentSync"]["change"] == 2  # incremental
        assert caps["hoverProvider"] and caps["documentSymbolProvider"]
        _send(sock, 2, "shutdown", {})
        assert _reply(sock, 2)["result"] is None
        exit_note = json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()
        sock.sendall(b"Content-Length: %d\r\n\r\n" % len(exit_note) + exit_note)
        assert proc.wait(15) == 0


def test_the_server_ends_when_its_client_leaves(
    server: tuple[subprocess.Popen[bytes], int],
) -> None:
    proc, port = server
    with _connect(port) as sock:
        _send(sock, 1, "initialize", {**INIT, "initializationOptions": {"token": TOKEN}})
        assert "result" in _reply(sock, 1)
    proc.wait(15)  # no exit was sent: the end of the connection is enough


@pytest.mark.parametrize(
    "options",
    [{"token": "wrong"}, {}, {"token": None}, {"token": TOKEN[:-1]}, {"token": [TOKEN]}, None],
)
def test_a_wrong_or_missing_token_is_answered_and_closed(
    server: tuple[subprocess.Popen[bytes], int], options: dict | None
) -> None:
    proc, port = server
    params = dict(INIT) if options is None else {**INIT, "initializationOptions": options}
    with _connect(port) as sock:
        _send(sock, 1, "initialize", params)
        reply = _reply(sock, 1)
        assert "result" not in reply
        assert "token is missing or wrong" in reply["error"]["message"]
        assert _closed(sock)
    # The server still waits for its client, who then gets in.
    assert proc.poll() is None
    with _connect(port) as sock:
        _send(sock, 1, "initialize", {**INIT, "initializationOptions": {"token": TOKEN}})
        assert "result" in _reply(sock, 1)


def test_a_first_message_other_than_initialize_is_refused(
    server: tuple[subprocess.Popen[bytes], int],
) -> None:
    _, port = server
    with _connect(port) as sock:
        _send(sock, 7, "shutdown", {"token": TOKEN})
        assert "must be initialize" in _reply(sock, 7)["error"]["message"]
        assert _closed(sock)


def test_a_second_connection_is_refused_while_one_is_served(
    server: tuple[subprocess.Popen[bytes], int],
) -> None:
    _, port = server
    with _connect(port) as first:
        _send(first, 1, "initialize", {**INIT, "initializationOptions": {"token": TOKEN}})
        assert "result" in _reply(first, 1)
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5).close()
        _send(first, 2, "shutdown", {})  # the first client is still served
        assert _reply(first, 2)["result"] is None


def test_help_lists_serve() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    for flag in ("--tcp", "--log-level", "--token-file", "--token", "--trust"):
        assert flag in out.stdout
