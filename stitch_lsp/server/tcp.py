"""`serve --tcp`: one authenticated client on a loopback socket.

Any local user can connect to a TCP port, and whoever holds the connection runs code with the
server owner's rights. So the server listens on a loopback address only, and the first message
of a connection must be `initialize` carrying `initializationOptions.token`, the secret the
server was started with (`--token`, or `--token-file` with mode 0600 or stricter). A connection
that sends anything else, a wrong token or nothing within `AUTH_TIMEOUT_S` gets an error reply
and is closed, and the server waits for the next one. Once a client is in, the listening socket
is closed: a second connection is refused, and the server ends when its client leaves.
"""

from __future__ import annotations

import contextlib
import hmac
import ipaddress
import json
import logging
import os
import re
import socket
import stat
import time
from typing import Any

log = logging.getLogger(__name__)

AUTH_TIMEOUT_S = 10.0
"""How long a new connection has to send its `initialize`."""
MAX_FIRST_MESSAGE = 4 * 2**20
"""An `initialize` is a few kilobytes; a longer first message is not one."""
MAX_TOKEN_FILE = 4096
UNAUTHORIZED = -32001
TOKEN_HELP = (
    "give a secret with --token-file PATH (a file of yours with mode 0600 holding it, e.g. "
    "`(umask 077; python3 -c 'import secrets; print(secrets.token_urlsafe())' > PATH)`) or "
    "--token TOKEN; the client sends it as initializationOptions.token"
)
_LENGTH = re.compile(rb"^Content-Length:[ \t]*(\d{1,10})[ \t]*$", re.IGNORECASE | re.MULTILINE)


class TcpSetupError(ValueError):
    """`serve --tcp` cannot start as asked: the message says what to change."""


def loopback_host(host: str) -> str:
    """`host` as the loopback address to bind; anything else is refused."""
    name = host.strip().strip("[]")
    if name.lower() == "localhost":
        return "127.0.0.1"
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        raise TcpSetupError(
            f"--host {host!r} is not an IP address: serve --tcp listens on loopback only "
            "(127.0.0.1 or ::1)"
        ) from None
    if not address.is_loopback:
        raise TcpSetupError(
            f"--host {host} is not a loopback address: serve --tcp listens on 127.0.0.1 or ::1 "
            "only, since whoever connects runs code as you (tunnel it with ssh -L to reach it "
            "from elsewhere)"
        )
    return str(address)


def read_token_file(path: str) -> str:
    """The secret in `path`: a regular file owned by this user that no one else may read or
    write (mode 0600 or stricter); its content, stripped of surrounding whitespace."""
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise TcpSetupError(f"--token-file {path}: cannot open it ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise TcpSetupError(f"--token-file {path}: not a regular file")
        if info.st_uid != os.getuid():
            raise TcpSetupError(f"--token-file {path}: owned by another user (uid {info.st_uid})")
        mode = stat.S_IMODE(info.st_mode)
        if mode & 0o077:
            raise TcpSetupError(
                f"--token-file {path}: mode {mode:04o} lets other users read or change it; "
                f"run `chmod 600 {path}`"
            )
        data = os.read(fd, MAX_TOKEN_FILE + 1)
    finally:
        os.close(fd)
    if len(data) > MAX_TOKEN_FILE:
        raise TcpSetupError(f"--token-file {path}: over {MAX_TOKEN_FILE} bytes; not a token")
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise TcpSetupError(f"--token-file {path}: not UTF-8 text") from None
    if not token:
        raise TcpSetupError(f"--token-file {path}: empty")
    return token


def choose_token(token: str | None, token_file: str | None) -> str:
    """The secret from `--token` or `--token-file` (exactly one of them)."""
    if token is not None and token_file is not None:
        raise TcpSetupError("give --token or --token-file, not both")
    if token_file is not None:
        return read_token_file(token_file)
    if token is None or not token.strip():
        raise TcpSetupError(f"serve --tcp needs a token: {TOKEN_HELP}")
    return token.strip()


def token_matches(options: Any, token: str) -> bool:
    """Whether `initializationOptions` carries the token (compared in constant time)."""
    given = options.get("token") if isinstance(options, dict) else None
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8"), token.encode("utf-8"))


class PrefixedConnection:
    """The client's byte stream for the server's reader: the first message (already read,
    without its token) and whatever followed it, then the socket."""

    def __init__(self, conn: socket.socket, prefix: bytes) -> None:
        self._conn = conn
        self._prefix = prefix

    def read1(self, size: int = -1) -> bytes:
        if self._prefix:
            n = len(self._prefix) if size < 0 else size
            chunk, self._prefix = self._prefix[:n], self._prefix[n:]
            return chunk
        return self._conn.recv(size if size > 0 else 65536)


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode("utf-8")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _read_first_message(conn: socket.socket) -> tuple[bytes, bytes]:
    """(body, bytes after it) of the first message; ValueError when it is not one."""
    deadline = time.monotonic() + AUTH_TIMEOUT_S
    buf = b""

    def more() -> None:
        nonlocal buf
        left = deadline - time.monotonic()
        if left <= 0:
            raise ValueError(f"no initialize within {AUTH_TIMEOUT_S:g} s")
        conn.settimeout(left)
        try:
            chunk = conn.recv(65536)
        except TimeoutError:
            raise ValueError(f"no initialize within {AUTH_TIMEOUT_S:g} s") from None
        if not chunk:
            raise ValueError("the connection closed before initialize")
        buf += chunk
        if len(buf) > MAX_FIRST_MESSAGE + 8192:
            raise ValueError("the first message is too long to be an initialize")

    while b"\r\n\r\n" not in buf:
        more()
    header, _, rest = buf.partition(b"\r\n\r\n")
    m = _LENGTH.search(header)
    if m is None:
        raise ValueError("the first message has no Content-Length header")
    length = int(m.group(1))
    if length > MAX_FIRST_MESSAGE:
        raise ValueError("the first message is too long to be an initialize")
    while len(rest) < length:
        buf = rest
        more()
        rest = buf
    return rest[:length], rest[length:]


def authenticate(conn: socket.socket, token: str) -> bytes | None:
    """Read the connection's first message; if it is `initialize` with the token, the bytes
    the server should read (that message without its token, then the rest); else None, after
    an error reply where there is a request to answer."""
    try:
        body, rest = _read_first_message(conn)
        message = json.loads(body)
    except (ValueError, OSError, RecursionError) as exc:
        log.warning("serve --tcp: closed a connection: %s", exc)
        return None
    msg_id = message.get("id") if isinstance(message, dict) else None
    if not isinstance(msg_id, (int, str)):
        msg_id = None
    params = message.get("params") if isinstance(message, dict) else None
    options = params.get("initializationOptions") if isinstance(params, dict) else None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        why = "the first message must be initialize with initializationOptions.token"
    elif not token_matches(options, token):
        why = (
            "the token is missing or wrong: send the secret the server was started with "
            "(serve --token or --token-file) as initializationOptions.token"
        )
    else:
        assert isinstance(options, dict) and isinstance(params, dict)
        params["initializationOptions"] = {k: v for k, v in options.items() if k != "token"}
        return _frame(message) + rest
    log.warning("serve --tcp: refused a connection: %s", why)
    if msg_id is not None:
        error = {"code": UNAUTHORIZED, "message": f"stitch-lsp: {why}"}
        with contextlib.suppress(OSError):
            conn.settimeout(2.0)
            conn.sendall(_frame({"jsonrpc": "2.0", "id": msg_id, "error": error}))
    return None


def listen(host: str, port: int) -> socket.socket:
    """The listening socket on a loopback address (checked again here)."""
    address = loopback_host(host)
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    try:
        return socket.create_server((address, port), family=family, backlog=8)
    except OSError as exc:
        raise TcpSetupError(f"cannot listen on {address} port {port}: {exc.strerror}") from None


def accept_one_client(listener: socket.socket, token: str) -> tuple[socket.socket, bytes]:
    """Wait for a connection that authenticates; close every other one, and then the
    listener, so no second client can connect."""
    try:
        while True:
            try:
                conn, peer = listener.accept()
            except (ConnectionAbortedError, InterruptedError):
                continue  # the client gave up before it was accepted
            prefix = authenticate(conn, token)
            if prefix is not None:
                conn.settimeout(None)
                log.info("serve --tcp: client %s authenticated", peer)
                return conn, prefix
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
    finally:
        listener.close()


def announce(listener: socket.socket) -> str:
    """The line (for stderr) that says where the server listens: a script that asked for
    port 0 reads the port from it."""
    host, port = listener.getsockname()[:2]
    return f"stitch-lsp: listening on {host} port {port} (one client, token required)"
