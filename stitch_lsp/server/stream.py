"""The server's end of the LSP byte stream: framing that survives a broken or hostile client.

pygls's reader trusts every header: one wrong `Content-Length` leaves it reading bodies from the
middle of messages for good (the process lives on, deaf), a huge one makes it try to read that
many bytes, and a request whose params do not fit their type is dropped without an answer. This
reader replaces that loop and keeps pygls for everything after framing:

- a `Content-Length:` header is found anywhere in a header line, so stray bytes before a header
  cost only those bytes (the stream resynchronises on the next header);
- a length over `MAX_BODY_BYTES` is refused with a log line, and the reader looks for the next
  header instead of allocating it;
- a body whose length was too long still yields its first JSON value, and what follows it (the
  next message's header) goes back into the stream;
- a body that stops arriving is given up after `BODY_STALL_S`, so a length that was too long
  cannot make the server wait for bytes the client will never send;
- a request that cannot be read is answered with the JSON-RPC error (-32700 parse error,
  -32600 invalid request, -32602 invalid params) instead of silence.

The bytes are read by a daemon thread (stdin may be a pipe, a file or a terminal) and handed to
the event loop, which never blocks on them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import JsonRPCProtocol

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 2**20
"""Larger bodies are refused: 50 times the largest file the server analyses, JSON-escaped."""
MAX_HEADER_LINE = 8192
"""A header line longer than this is junk; the reader keeps only its tail (a header may follow)."""
BODY_STALL_S = 2.0
"""How long the rest of a started body may take to arrive before it is given up."""
CHUNK = 65536
MAX_LOGGED = 50
"""Framing problems logged per session; a client that sends nothing but junk must not flood."""

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002

_HEADER = re.compile(rb"Content-Length:[ \t]*(\d+)[ \t]*\r?$", re.IGNORECASE)
_OTHER_HEADER = re.compile(rb"^[A-Za-z][A-Za-z0-9-]*:[^\r\n]*\r?$")
_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


class OutputWriter:
    """stdout for pygls: after `exit` closed it (or the client went away), later messages (a
    log line from a task being cancelled on the way out) are dropped, not raised as errors."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self.closed = False

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError, ValueError):
            self._stream.close()

    def write(self, data: bytes) -> None:
        if self.closed:
            return
        try:
            self._stream.write(data)
            self._stream.flush()
        except (OSError, ValueError):  # a broken pipe, or closed underneath us
            self.closed = True
            log.info("the client's end of stdout is gone; output stops here")


class ChunkSource:
    """Reads a binary stream in a daemon thread; `await read()` returns the next chunk (b"" at
    end of stream). At most a few chunks wait in memory: the thread stops reading when the
    loop does not keep up, so a flood from the client cannot exhaust memory."""

    def __init__(self, stream: BinaryIO, loop: asyncio.AbstractEventLoop) -> None:
        self._stream = stream
        self._loop = loop
        self._queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=8)
        self._thread = threading.Thread(target=self._pump, name="stitch-lsp-stdin", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        # The raw descriptor, not the buffered object: a thread blocked inside a BufferedReader
        # holds its lock, and the interpreter aborts at exit when it finds that lock taken.
        read: Callable[[int], bytes]
        try:
            fd = self._stream.fileno()

            def read(n: int) -> bytes:
                return os.read(fd, n)

        except (AttributeError, OSError, ValueError):  # an in-memory stream (tests)
            read = getattr(self._stream, "read1", None) or self._stream.read
        while True:
            try:
                chunk = read(CHUNK)
            except (OSError, ValueError):  # closed underneath us
                chunk = b""
            try:
                asyncio.run_coroutine_threadsafe(self._queue.put(chunk or b""), self._loop).result()
            except Exception:  # the loop is gone: the server is exiting
                return
            if not chunk:
                return

    async def read(self, timeout: float | None = None) -> bytes | None:
        """The next chunk; None when `timeout` passed first."""
        if timeout is None:
            return await self._queue.get()
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except asyncio.TimeoutError:
            return None


class Framer:
    """Cuts a byte stream into message bodies, resynchronising on the next header after junk."""

    def __init__(self, read: Callable[..., Any], report: Callable[[str], None]) -> None:
        self._read = read
        self._report = report
        self._buf = bytearray()
        self._eof = False

    def push_back(self, data: bytes) -> None:
        """Return bytes to the front of the stream (what followed a body's JSON value)."""
        self._buf[:0] = data

    async def _fill(self, timeout: float | None = None) -> bool:
        """Read one more chunk into the buffer; False at end of stream or timeout."""
        if self._eof:
            return False
        chunk = await self._read(timeout)
        if chunk is None:
            return False
        if not chunk:
            self._eof = True
            return False
        self._buf += chunk
        return True

    async def _line(self) -> bytes | None:
        """The next line with its terminator; None at end of stream."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[: nl + 1])
                del self._buf[: nl + 1]
                return line
            if len(self._buf) > MAX_HEADER_LINE:
                # No header is this long; keep a tail in case a header starts inside it.
                dropped = len(self._buf) - 64
                del self._buf[:dropped]
                self._report(f"skipped {dropped} bytes that were not an LSP header")
            if not await self._fill():
                if self._buf:
                    rest = bytes(self._buf)
                    self._buf.clear()
                    return rest
                return None

    async def next_body(self) -> bytes | None:
        """The next message body; None at end of stream."""
        length: int | None = None
        junk = 0
        while True:
            line = await self._line()
            if line is None:
                return None
            if length is not None and line.strip() == b"":
                break  # end of the headers
            m = _HEADER.search(line.rstrip(b"\n"))
            if m is not None:
                junk += m.start()
                claimed = int(m.group(1))
                if claimed > MAX_BODY_BYTES:
                    self._report(
                        f"ignored a message that claims {m.group(1)[:30].decode()} bytes "
                        f"(the limit is {MAX_BODY_BYTES // 2**20} MiB); "
                        "looking for the next header"
                    )
                    length = None
                    continue
                length = claimed
                continue
            if _OTHER_HEADER.match(line):
                continue  # Content-Type and the like
            if line.strip():
                junk += len(line)
                length = None  # a header block broken by junk starts over
        if junk:
            self._report(f"skipped {junk} bytes of junk before a message header")
        deadline = asyncio.get_running_loop().time() + BODY_STALL_S
        while len(self._buf) < length:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0 or not await self._fill(left):
                self._report(
                    f"a message said Content-Length {length} but only {len(self._buf)} bytes "
                    "came; reading what came"
                )
                body = bytes(self._buf)
                self._buf.clear()
                return body
            deadline = asyncio.get_running_loop().time() + BODY_STALL_S
        body = bytes(self._buf[:length])
        del self._buf[:length]
        return body


def decode_body(body: bytes) -> tuple[Any, bytes, str | None]:
    """(the JSON value, bytes left over after it, why it failed or None).

    A body that is longer than its JSON value (the Content-Length was too big) gives the value
    and the rest; the caller puts the rest back into the stream.
    """
    try:
        return json.loads(body), b"", None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        first_error = f"{type(exc).__name__}: {exc}"[:200]
    try:
        text = body.decode("utf-8")
        start = len(text) - len(text.lstrip())
        value, end = json.JSONDecoder().raw_decode(text, start)
        rest = text[end:].encode("utf-8")
        return value, rest, None
    except (UnicodeDecodeError, ValueError, RecursionError):
        pass
    # Not JSON at all: if the next message's header got swallowed, give it back.
    at = body.find(b"Content-Length:")
    rest = body[at:] if at > 0 else b""
    return None, rest, first_error


class StreamServer:
    """Reads messages from a stream and hands them to a pygls protocol."""

    def __init__(self, protocol: JsonRPCProtocol, stop_event: threading.Event) -> None:
        self.protocol = protocol
        self.stop_event = stop_event
        self.last_method: str | None = None  # for the loop watchdog's account
        self._logged = 0

    def report(self, message: str) -> None:
        """A framing problem: one log line (stderr and the client's log), up to MAX_LOGGED."""
        self._logged += 1
        if self._logged > MAX_LOGGED:
            return
        if self._logged == MAX_LOGGED:
            message += " (further stream problems are not logged)"
        log.warning("stitch-lsp stream: %s", message)
        try:
            self.protocol.notify(
                lsp.WINDOW_LOG_MESSAGE,
                lsp.LogMessageParams(
                    type=lsp.MessageType.Warning, message=f"stitch-lsp: {message}"
                ),
            )
        except Exception:
            log.debug("could not send the log message", exc_info=True)

    async def serve(self, stream: BinaryIO) -> None:
        source = ChunkSource(stream, asyncio.get_running_loop())
        framer = Framer(source.read, self.report)
        while not self.stop_event.is_set():
            body = await framer.next_body()
            if body is None:
                break
            value, rest, problem = decode_body(body)
            if rest.strip():
                framer.push_back(rest)
            if problem is not None:
                self._unreadable(body, problem)
                continue
            try:
                self.dispatch(value)
            except Exception:  # pygls handles its own errors; this is a last line of defence
                log.exception("stitch-lsp stream: could not handle a message")
            # Let handlers scheduled by this message start before the next one is read.
            await asyncio.sleep(0)

    def _unreadable(self, body: bytes, problem: str) -> None:
        self.report(f"discarded a message body that is not JSON ({len(body)} bytes: {problem})")
        m = _ID.search(body)
        if m is not None and b'"method"' in body:
            # The client waits for an answer to this request: give it one.
            msg_id = json.loads(m.group(1))
            self.send_error(msg_id, PARSE_ERROR, f"Parse error: {problem}")

    def send_error(self, msg_id: Any, code: int, message: str) -> None:
        if not isinstance(msg_id, (int, str)):
            msg_id = None
        self.protocol._send_data(
            lsp.ResponseErrorMessage(id=msg_id, error=lsp.ResponseError(code=code, message=message))
        )

    def dispatch(self, raw: Any) -> None:
        """Structure one decoded message and hand it to the protocol."""
        if not isinstance(raw, dict) or raw.get("jsonrpc") != "2.0":
            self.report("ignored a message that is not a JSON-RPC 2.0 object")
            if isinstance(raw, dict) and "method" in raw and "id" in raw:
                self.send_error(raw["id"], INVALID_REQUEST, "Invalid Request: not JSON-RPC 2.0")
            return
        method = raw.get("method")
        self.last_method = method if isinstance(method, str) else "a reply from the client"
        is_request = "id" in raw and method is not None
        if method is not None and not isinstance(method, str):
            if is_request:
                self.send_error(raw["id"], INVALID_REQUEST, "Invalid Request: method")
            self.report("ignored a message whose method is not a string")
            return
        if (
            is_request
            and method != lsp.INITIALIZE
            and not getattr(self.protocol, "initialize_seen", True)
        ):
            # Nothing is read from a request before initialize, not even its params.
            self.send_error(raw["id"], SERVER_NOT_INITIALIZED, "the server is not initialized yet")
            return
        try:
            message = self.protocol.structure_message(raw)
        except JsonRpcException as exc:
            self._invalid(raw, method, is_request, exc)
            return
        except Exception as exc:  # the converter can fail in other ways on hostile input
            self._invalid(raw, method, is_request, JsonRpcInvalidParams(str(exc)))
            return
        self.protocol.handle_message(message)

    def _invalid(
        self, raw: dict[str, Any], method: Any, is_request: bool, exc: JsonRpcException
    ) -> None:
        cause = exc.__cause__
        detail = _first_line(cause) if cause is not None else exc.message
        if is_request:
            self.send_error(raw["id"], INVALID_PARAMS, f"Invalid params for {method}: {detail}")
        elif method is not None:
            self.report(f"ignored a {method} notification with invalid params: {detail}")
        else:
            self.report(f"ignored a response that could not be read: {detail}")


def _first_line(exc: BaseException) -> str:
    """A short account of a cattrs validation error: the first leaf exception's message."""
    seen = 0
    while hasattr(exc, "exceptions") and exc.exceptions and seen < 20:  # ExceptionGroup
        exc = exc.exceptions[0]
        seen += 1
    text = str(exc).strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:200]
