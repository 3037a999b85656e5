"""One chat call to an OpenAI-compatible endpoint, with retries where a retry can help.

The `openai` client's own retries are off: we classify every failure ourselves so the loop can
end a run with a message that says what went wrong (unreachable, 4xx/5xx, timeout, a reply that
is not JSON or cut off, one too large), and so a cancellation interrupts the back-off.

A reply body is read no further than `reply_cap` bytes (1 MiB at the default llmMaxTokens): an
endpoint that sends more is rejected with kind "too_large", which the LLM Coder records as an
attempt without code, so one reply can neither exhaust memory nor bloat the trajectory.

`llmTimeoutS` bounds the whole call, retries and back-offs included: the HTTP client's timeout
is per read, so an endpoint that trickles a byte a second would otherwise never time out. A
reply that is not JSON is tried once more; a 429/503 with `Retry-After` waits what it asks when
that fits in the time left.
"""

from __future__ import annotations

import contextlib
import email.utils
import gc
import json
import os
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from stitch_lsp.config import Settings

if TYPE_CHECKING:  # imported where a request is made: the builtin coder never needs it, and
    import openai  # its import (1-2 s) held the language server's event loop

FailureKind = Literal[
    "unreachable",
    "timeout",
    "http",
    "auth",
    "truncated",
    "too_large",
    "malformed",
    "config",
    "cancelled",
]
_NO_KEY = "sk-no-key-required"
_RETRIED = frozenset({"unreachable", "timeout", "http"})
_MALFORMED_TRIES = 2  # a reply that is not JSON: once more, then give up
MIN_REPLY_CAP = 2**20  # bytes of reply body read at most, whatever llm_max_tokens says
BYTES_PER_TOKEN = 32  # generous: a token is a few characters, JSON escapes some up to 6 bytes


def reply_cap(settings: Settings) -> int:
    """The most bytes of a reply body read: 1 MiB, or more for a large llm_max_tokens."""
    return max(MIN_REPLY_CAP, settings.llm_max_tokens * BYTES_PER_TOKEN)


class EndpointError(RuntimeError):
    """The endpoint could not give a usable reply; `kind` says why, the message says what to do."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind


@dataclass
class ChatReply:
    text: str
    finish_reason: str | None
    model: str | None = None
    usage: dict[str, int] = field(default_factory=dict)


class ChatClient:
    """Chat requests to `settings.llm_base_url`; `retries` extra tries for transient failures."""

    def __init__(
        self,
        settings: Settings,
        *,
        retries: int = 2,
        backoff_s: float = 1.0,
        cancel: threading.Event | None = None,
    ) -> None:
        if not settings.llm_base_url:
            raise EndpointError(
                "config", "no LLM endpoint configured (stitch.llmBaseUrl / --base-url)"
            )
        self.settings = settings
        self.retries = retries
        self.backoff_s = backoff_s
        self.cancel = cancel or threading.Event()
        self._key = os.environ.get(settings.llm_api_key_env) or _NO_KEY

    @property
    def endpoint(self) -> str:
        return f"{self.settings.llm_base_url} (model {self.settings.llm_model})"

    def chat(self, messages: list[dict[str, str]]) -> ChatReply:
        """Return the first choice; raise EndpointError when no usable reply came back within
        `llm_timeout_s`, however many tries that took."""
        budget = self.settings.llm_timeout_s
        deadline = time.monotonic() + budget
        last: EndpointError | None = None
        tries = malformed = 0
        while True:
            if self.cancel.is_set():
                raise EndpointError("cancelled", "cancelled")
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._out_of_time(last, tries)
            tries += 1
            try:
                return self._interruptible(messages, left)
            except EndpointError as exc:
                last = exc
                if exc.kind == "malformed":
                    malformed += 1
                    if malformed >= _MALFORMED_TRIES:
                        raise EndpointError(
                            "malformed", f"{exc} (after {malformed} tries)"
                        ) from None
                    continue
                if exc.kind not in _RETRIED or _is_client_error(exc):
                    raise
                if exc.kind == "timeout" or tries > self.retries:
                    raise EndpointError(exc.kind, self._tries_note(exc, tries)) from None
            wait = self.backoff_s * 2 ** (tries - 1)
            asked = getattr(last, "retry_after", None)
            if asked is not None:
                if asked > deadline - time.monotonic():
                    raise EndpointError(
                        last.kind,
                        f"{last}; it asked to retry after {asked:g} s, which is past the "
                        f"{budget:g} s limit (stitch.llmTimeoutS)",
                    )
                wait = asked
            if self.cancel.wait(max(0.0, min(wait, deadline - time.monotonic()))):
                raise EndpointError("cancelled", "cancelled")

    def _tries_note(self, exc: EndpointError, tries: int) -> str:
        return f"{exc} (after {tries} tries)" if tries > 1 else str(exc)

    def _out_of_time(self, last: EndpointError | None, tries: int) -> EndpointError:
        limit = f"{self.settings.llm_timeout_s:g} s"
        why = f"; last: {last}" if last is not None else ""
        return EndpointError(
            "timeout", f"{self.endpoint} gave no usable answer within {limit} ({tries} tries{why})"
        )

    def _interruptible(self, messages: list[dict[str, str]], timeout_s: float) -> ChatReply:
        """One request in a daemon thread, so that a cancel or the deadline returns at once;
        the request's own connection is then closed, which ends it."""
        openai = _openai()
        box: dict[str, object] = {}
        done = threading.Event()
        client = openai.OpenAI(
            base_url=self.settings.llm_base_url,
            api_key=self._key,
            timeout=timeout_s,
            max_retries=0,
        )

        def work() -> None:
            try:
                box["reply"] = self._once(client, messages)
            except BaseException as exc:
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="stitch-llm-request", daemon=True).start()
        deadline = time.monotonic() + timeout_s
        try:
            while not done.wait(0.1):
                if self.cancel.is_set():
                    raise EndpointError("cancelled", "cancelled")
                if time.monotonic() > deadline:
                    raise EndpointError(
                        "timeout",
                        f"{self.endpoint} did not answer within {self.settings.llm_timeout_s:g} s "
                        "(the whole reply must arrive in that time)",
                    )
        finally:
            if not done.is_set():
                _close_quietly(client)
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["reply"]  # type: ignore[return-value]

    def _once(self, client: openai.OpenAI, messages: list[dict[str, str]]) -> ChatReply:
        openai = _openai()
        s = self.settings
        try:
            with client.chat.completions.with_streaming_response.create(
                model=s.llm_model,
                messages=messages,  # type: ignore[arg-type]
                temperature=s.llm_temperature,
                max_tokens=s.llm_max_tokens,
            ) as raw:
                body = self._capped_body(raw)
        except EndpointError:
            raise
        except openai.APITimeoutError as exc:
            raise EndpointError(
                "timeout", f"{self.endpoint} did not answer within {s.llm_timeout_s:g} s"
            ) from exc
        except openai.APIConnectionError as exc:
            raise EndpointError("unreachable", f"cannot reach {self.endpoint}: {exc}") from exc
        except openai.AuthenticationError as exc:
            raise EndpointError(
                "auth",
                f"{self.endpoint} refused the API key (HTTP {exc.status_code}); "
                f"set it in the environment variable {s.llm_api_key_env}",
            ) from exc
        except openai.APIStatusError as exc:
            err = EndpointError(
                "http", f"{self.endpoint} answered HTTP {exc.status_code}: {_brief(exc)}"
            )
            err.status_code = exc.status_code  # type: ignore[attr-defined]
            err.retry_after = _retry_after(exc)  # type: ignore[attr-defined]
            raise err from exc
        except openai.OpenAIError as exc:
            raise EndpointError(
                "malformed", f"{self.endpoint} sent a reply that is not valid JSON ({_short(exc)})"
            ) from exc
        return self._reply_of(body)

    def _capped_body(self, raw: Any) -> bytes:
        """The reply body, read no further than `reply_cap`: EndpointError("too_large") past it.
        A read that fails half-way is a timeout or a broken connection, as before the body."""
        import httpx2

        cap = reply_cap(self.settings)
        declared = raw.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            raise self._too_large(cap, f"it declared {int(declared):,} bytes")
        body = bytearray()
        try:
            for chunk in raw.iter_bytes():
                body += chunk
                if len(body) > cap:
                    raise self._too_large(cap, "reading stopped there")
        except httpx2.TimeoutException as exc:
            raise EndpointError(
                "timeout",
                f"{self.endpoint} stopped sending its reply (no data for "
                f"{self.settings.llm_timeout_s:g} s)",
            ) from exc
        except httpx2.HTTPError as exc:
            raise EndpointError(
                "unreachable", f"the connection to {self.endpoint} broke during the reply: {exc}"
            ) from exc
        return bytes(body)

    def _too_large(self, cap: int, detail: str) -> EndpointError:
        return EndpointError(
            "too_large",
            f"the reply from {self.endpoint} was larger than {cap:,} bytes ({detail}) and was "
            f"rejected; a reply of stitch.llmMaxTokens ({self.settings.llm_max_tokens}) tokens "
            "fits well within that",
        )

    def _reply_of(self, body: bytes) -> ChatReply:
        s = self.settings
        try:
            data = json.loads(body)
        except ValueError as exc:  # not UTF-8, or not JSON
            raise EndpointError(
                "malformed", f"{self.endpoint} sent a reply that is not valid JSON ({_short(exc)})"
            ) from exc
        try:
            choice = data["choices"][0]
            message = choice.get("message") or {}
            text = message.get("content") or ""
            finish = choice.get("finish_reason")
            if not isinstance(text, str) or not (finish is None or isinstance(finish, str)):
                raise TypeError("content or finish_reason is not a string")
        except (AttributeError, IndexError, KeyError, TypeError) as exc:
            raise EndpointError(
                "malformed", f"{self.endpoint} answered without any choices ({_short(exc)})"
            ) from exc
        if finish == "length":
            raise EndpointError(
                "truncated",
                f"the reply from {self.endpoint} was cut off at {s.llm_max_tokens} tokens "
                "(finish_reason=length); raise stitch.llmMaxTokens or use a longer-output model",
            )
        model = data.get("model")
        return ChatReply(
            text=text,
            finish_reason=finish,
            model=model if isinstance(model, str) else None,
            usage=_usage(data),
        )


_openai_frozen = False


def _openai() -> Any:
    """The `openai` module, imported on first use. Its import builds thousands of classes that
    live as long as the process; they are moved out of the cyclic collector's reach once, as
    the server does with its own imports at start-up (a full collection over them paused the
    language server's event loop for about 110 ms)."""
    global _openai_frozen
    import openai

    if not _openai_frozen:
        _openai_frozen = True
        gc.freeze()
    return openai


def _usage(data: dict[str, Any]) -> dict[str, int]:
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return {}
    return {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}


def _close_quietly(client: openai.OpenAI) -> None:
    # Closing under a running request may complain; the request is ending anyway.
    with contextlib.suppress(Exception):
        client.close()


def _short(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}".rstrip(
        ": "
    )


def _retry_after(exc: openai.APIStatusError) -> float | None:
    """Seconds the server asked to wait (Retry-After: seconds or an HTTP date), for 429/503."""
    if exc.status_code not in (429, 503):
        return None
    try:
        value = exc.response.headers.get("retry-after")
    except Exception:
        return None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _is_client_error(exc: EndpointError) -> bool:
    """4xx other than 408/409/429 will not change on a retry."""
    code = getattr(exc, "status_code", None)
    return code is not None and 400 <= code < 500 and code not in {408, 409, 429}


def _brief(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
    return str(exc.message)[:300]
