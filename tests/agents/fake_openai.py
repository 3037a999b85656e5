"""A loopback OpenAI-compatible chat endpoint that replays scripted replies (127.0.0.1 only).

Requests are routed by their system prompt: the Planner's, the rubric judge's, and the Coder's
each have their own script. Every request is recorded for assertions. A scripted step is a reply
text, a function of the request's last user message that returns the reply text (a scripted Coder
that edits the program it is shown), or a `Fail` that answers with an HTTP status (with a
Retry-After header if asked), hangs past the client's timeout, cuts the reply at max tokens,
trickles its body one byte at a time, sends a body that is not JSON (garbage) or JSON cut off
in the middle, or sends a good body without declaring its length.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 4 * 2**20


@dataclass
class Fail:
    status: int = 500
    hang_s: float = 0.0
    truncated: bool = False
    text: str = "server error"
    retry_after: str | None = None  # the Retry-After header of an error reply
    trickle_s: float = 0.0  # send a good reply's body one byte every trickle_s seconds
    garbage: bool = False  # status 200 with a body that is not JSON
    cut_json: bool = False  # status 200 with a JSON body cut off halfway
    undeclared: bool = False  # a good reply without Content-Length: the body ends at close


Step = str | Fail | Callable[[str], str]


@dataclass
class Script:
    coder: deque[Step] = field(default_factory=deque)
    planner: deque[Step] = field(default_factory=deque)
    judge: deque[Step] = field(default_factory=deque)
    requests: list[dict[str, Any]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)  # ends trickles at exit

    def role_of(self, body: dict[str, Any]) -> str:
        system = next((m["content"] for m in body.get("messages", []) if m["role"] == "system"), "")
        if "You are the Planner" in system:
            return "planner"
        if "You grade CUDA" in system:
            return "judge"
        return "coder"

    def prompts(self, role: str) -> list[str]:
        """The user messages the endpoint received for `role`, in order."""
        return [
            next(m["content"] for m in r["messages"] if m["role"] == "user")
            for r in self.requests
            if self.role_of(r) == role
        ]


class FakeOpenAI:
    def __init__(self) -> None:
        self.script = Script()
        script = self.script

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                if not self.path.endswith("/chat/completions") or length > MAX_BODY:
                    self._send(404, {"error": {"message": "not found"}})
                    return
                body = json.loads(self.rfile.read(length))
                script.requests.append(body)
                role = script.role_of(body)
                queue: deque[Step] = getattr(script, role)
                step: Step
                if queue:
                    step = queue.popleft()
                elif role == "coder":
                    step = Fail(500, text="the test script has no more coder replies")
                else:
                    step = "{}"  # planner/judge: an empty JSON object changes nothing
                if callable(step) and not isinstance(step, Fail):
                    user = [m["content"] for m in body["messages"] if m["role"] == "user"]
                    step = step(user[-1] if user else "")
                if isinstance(step, Fail):
                    if step.hang_s:
                        time.sleep(step.hang_s)
                    if step.garbage:
                        self._send_raw(200, b"<html>502 Bad Gateway</html>\x00\xff garbage")
                        return
                    if step.cut_json:
                        data = json.dumps(_completion(body, step.text, "stop")).encode()
                        self._send_raw(200, data[: len(data) // 2])
                        return
                    if step.undeclared:
                        data = json.dumps(_completion(body, step.text, "stop")).encode()
                        self._send_raw(200, data, declare_length=False)
                        return
                    if step.trickle_s:
                        data = json.dumps(_completion(body, step.text, "stop")).encode()
                        self._send_raw(200, data, trickle_s=step.trickle_s)
                        return
                    if not step.truncated:
                        headers = {"Retry-After": step.retry_after} if step.retry_after else {}
                        self._send(step.status, {"error": {"message": step.text}}, headers)
                        return
                    self._send(200, _completion(body, step.text, "length"))
                    return
                self._send(200, _completion(body, step, "stop"))

            def _send(
                self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None
            ) -> None:
                self._send_raw(status, json.dumps(payload).encode(), headers=headers)

            def _send_raw(
                self,
                status: int,
                data: bytes,
                *,
                headers: dict[str, str] | None = None,
                trickle_s: float = 0.0,
                declare_length: bool = True,
            ) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    if declare_length:
                        self.send_header("Content-Length", str(len(data)))
                    else:
                        self.close_connection = True
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    if not trickle_s:
                        self.wfile.write(data)
                        return
                    for i in range(len(data)):
                        self.wfile.write(data[i : i + 1])
                        self.wfile.flush()
                        if script.stop.wait(trickle_s):
                            return
                except (BrokenPipeError, ConnectionResetError, OSError):
                    pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeOpenAI:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.script.stop.set()
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=5)


def _completion(body: dict[str, Any], text: str, finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "test-model"),
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
    }
