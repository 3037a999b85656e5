"""The lifecycle rules of LSP that pygls leaves to the server, and errors without tracebacks.

- Before `initialize`, a request gets -32002 (ServerNotInitialized) and a notification is
  dropped; nothing about the server (least of all its settings) is answered.
- After `shutdown`, a request gets -32600 (InvalidRequest) instead of silence; `exit` ends the
  process with 0 after `shutdown` and 1 without it.
- `didChange` for a document that was never opened is logged, not raised (pygls's KeyError
  reached the user as a pop-up); pygls's own copy of a document of a megabyte or more is not
  edited (`unsynced`): the server's `Document` holds the text.
- A handler's exception is answered with its one-line message; the traceback goes to the
  server's log, never into the response.
- `$/cancelRequest` reaches the handler a built-in feature (executeCommand) delegated to, so a
  cancelled `stitch.generate` really stops; and finished handlers are forgotten (pygls kept the
  future of every notification's handler, which grew the server by each didOpen/didChange).
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Any
from urllib.parse import unquote

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.protocol import LanguageServerProtocol, lsp_method

log = logging.getLogger(__name__)

SERVER_NOT_INITIALIZED = -32002
INVALID_REQUEST = -32600
UNSYNCED_CHARS = 1_000_000
"""From this size on, pygls's copy of a document is no longer edited (see did_change)."""


class GuardedProtocol(LanguageServerProtocol):
    """pygls's LSP protocol with the lifecycle enforced (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.initialize_seen = False
        self.shutdown_received = False
        self.unsynced: set[str] = set()
        """URIs whose pygls copy is no longer edited (large documents)."""
        # The handlers a client request runs through pygls's built-in generator features
        # (executeCommand): cancelling the request must reach them too.
        self._inner: dict[Any, list[Any]] = {}

    def _execute_handler(
        self,
        msg_id: Any,
        handler: Any,
        callback: Any,
        args: Any = None,
        kwargs: Any = None,
    ) -> None:
        outer = self.msg_id  # the client request this handler serves, if any
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        future = self._request_futures.get(msg_id)
        if future is None:
            return

        def drop(done: Any, msg_id: Any = msg_id) -> None:
            if self._request_futures.get(msg_id) is done:
                del self._request_futures[msg_id]
            inner = self._inner.get(outer)
            if inner is not None and done in inner:
                inner.remove(done)
                if not inner:
                    del self._inner[outer]

        def forget(done: Any) -> None:
            # pygls files every handler's future under an id and removes only those it answers:
            # each notification (didOpen, didChange, ...) left two behind, for good. Dropped on
            # the next loop turn: `shutdown` cancels these futures while iterating the dict.
            try:
                asyncio.get_running_loop().call_soon(drop, done)
            except RuntimeError:  # no loop here (a thread): nothing iterates the dict now
                drop(done)

        if outer is not None and outer != msg_id:
            self._inner.setdefault(outer, []).append(future)
        future.add_done_callback(forget)

    def _handle_cancel_notification(self, msg_id: Any) -> None:
        for inner in self._inner.pop(msg_id, []):
            inner.cancel()
        super()._handle_cancel_notification(msg_id)

    def handle_message(self, message: Any) -> None:
        method = getattr(message, "method", None)
        msg_id = getattr(message, "id", None)
        is_request = method is not None and hasattr(message, "id")
        if not self.initialize_seen and method != lsp.INITIALIZE:
            if is_request:
                self._refuse(msg_id, SERVER_NOT_INITIALIZED, "the server is not initialized yet")
                return
            if method is not None and method != lsp.EXIT:
                log.info("dropped %s: it came before initialize", method)
                return
        if is_request and method == lsp.SHUTDOWN:
            self.shutdown_received = True
        if is_request and method == lsp.INITIALIZE:
            if self.initialize_seen:
                self._refuse(msg_id, INVALID_REQUEST, "initialize was already received")
                return
            self.initialize_seen = True
        if self._shutdown and is_request:
            self._refuse(msg_id, INVALID_REQUEST, "the server is shutting down")
            return
        super().handle_message(message)

    def _refuse(self, msg_id: Any, code: int, message: str) -> None:
        self._send_response(msg_id, error=lsp.ResponseError(code=code, message=message))

    def _send_handler_result(self, future: Future[Any], *, msg_id: Any) -> None:
        if not future.cancelled():
            exc = future.exception()
            if exc is not None and not isinstance(exc, JsonRpcException):
                self._request_futures.pop(msg_id, None)
                log.error("request %s failed", msg_id, exc_info=exc)
                clean = JsonRpcInternalError(message=f"{type(exc).__name__}: {exc}"[:500])
                self._send_response(msg_id, error=clean.to_response_error())
                return
        super()._send_handler_result(future, msg_id=msg_id)

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any):
        # Exit code 0 once `shutdown` was received, even if its handler (which stops the jobs)
        # has not finished: a client need not wait for the reply.
        if self.shutdown_received:
            self._shutdown = True
        return (yield from super().lsp_exit(*args))

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: lsp.DidChangeTextDocumentParams):
        uri = params.text_document.uri
        if unquote(uri) not in self.workspace.text_documents:
            log.warning("ignored didChange for %s: the document is not open", uri)
            self.notify(
                lsp.WINDOW_LOG_MESSAGE,
                lsp.LogMessageParams(
                    type=lsp.MessageType.Warning,
                    message=f"stitch-lsp: ignored a change to {uri}: it was never opened",
                ),
            )
            return None
        copy = self.workspace.text_documents[unquote(uri)]
        if uri in self.unsynced or len(copy.source) >= UNSYNCED_CHARS:
            # pygls's own copy of a large text would be re-split into lines in Python on every
            # keystroke (0.5 s in a 50 MB file); the server's Document is the text that counts.
            self.unsynced.add(uri)
            copy.version = params.text_document.version
            handler = self.fm.features.get(lsp.TEXT_DOCUMENT_DID_CHANGE)
            if handler is not None:
                yield handler, (params,), None
            return None
        return (yield from super().lsp_text_document__did_change(params))

    @lsp_method(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: lsp.DidCloseTextDocumentParams):
        self.unsynced.discard(params.text_document.uri)
        return (yield from super().lsp_text_document__did_close(params))
