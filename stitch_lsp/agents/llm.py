"""One chat call to an OpenAI-compatible endpoint, with retries where a retry can help.

The `openai` client's own retries are off: we classify every failure ourselves so the loop can
end a run with a message that says what went wrong (unreachable, 4xx/5xx, timeout, truncated
reply), and so a cancellation interrupts the back-off.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Literal

import openai

from stitch_lsp.config import Settings

FailureKind = Literal["unreachable", "timeout", "http", "auth", "truncated", "config", "cancelled"]
_NO_KEY = "sk-no-key-required"


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
        key = os.environ.get(settings.llm_api_key_env) or _NO_KEY
        self._client = openai.OpenAI(
            base_url=settings.llm_base_url,
            api_key=key,
            timeout=settings.llm_timeout_s,
            max_retries=0,
        )

    @property
    def endpoint(self) -> str:
        return f"{self.settings.llm_base_url} (model {self.settings.llm_model})"

    def chat(self, messages: list[dict[str, str]]) -> ChatReply:
        """Return the first choice; raise EndpointError when no usable reply came back."""
        last: EndpointError | None = None
        for attempt in range(self.retries + 1):
            if self.cancel.is_set():
                raise EndpointError("cancelled", "cancelled")
            try:
                return self._interruptible(messages)
            except EndpointError as exc:
                if exc.kind not in {"unreachable", "timeout", "http"} or _is_client_error(exc):
                    raise
                last = exc
            if attempt < self.retries and self.cancel.wait(self.backoff_s * 2**attempt):
                raise EndpointError("cancelled", "cancelled")
        assert last is not None
        raise EndpointError(last.kind, f"{last} (after {self.retries + 1} tries)")

    def _interruptible(self, messages: list[dict[str, str]]) -> ChatReply:
        """Run the request in a daemon thread so a cancel returns at once, not at the timeout."""
        box: dict[str, object] = {}
        done = threading.Event()

        def work() -> None:
            try:
                box["reply"] = self._once(messages)
            except BaseException as exc:
                box["error"] = exc
            finally:
                done.set()

        threading.Thread(target=work, name="stitch-llm-request", daemon=True).start()
        while not done.wait(0.1):
            if self.cancel.is_set():
                raise EndpointError("cancelled", "cancelled")
        if "error" in box:
            raise box["error"]  # type: ignore[misc]
        return box["reply"]  # type: ignore[return-value]

    def _once(self, messages: list[dict[str, str]]) -> ChatReply:
        s = self.settings
        try:
            resp = self._client.chat.completions.create(
                model=s.llm_model,
                messages=messages,  # type: ignore[arg-type]
                temperature=s.llm_temperature,
                max_tokens=s.llm_max_tokens,
            )
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
            raise err from exc
        except openai.OpenAIError as exc:  # malformed JSON and the like
            raise EndpointError("http", f"{self.endpoint} sent an unusable answer: {exc}") from exc
        if not getattr(resp, "choices", None):
            raise EndpointError("http", f"{self.endpoint} answered without any choices")
        choice = resp.choices[0]
        text = (choice.message.content if choice.message else None) or ""
        if choice.finish_reason == "length":
            raise EndpointError(
                "truncated",
                f"the reply from {self.endpoint} was cut off at {s.llm_max_tokens} tokens "
                "(finish_reason=length); raise stitch.llmMaxTokens or use a longer-output model",
            )
        usage = resp.usage.model_dump(exclude_none=True) if resp.usage else {}
        usage = {k: v for k, v in usage.items() if isinstance(v, int)}
        return ChatReply(
            text=text, finish_reason=choice.finish_reason, model=resp.model, usage=usage
        )


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
