"""The real server over stdio, fed broken framing, invalid params and lifecycle abuse.

After every case the server must still answer, must never have crashed, and must never have
shown a traceback or a pop-up for protocol junk. Each request gets an answer: its result, or a
JSON-RPC error with the right code.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.rpc import RawServer, frame

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
NOT_INITIALIZED = -32002

PY = "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    srv = RawServer(tmp_path)
    try:
        yield srv
    finally:
        srv.close()


def ready(srv: RawServer, root: Path) -> None:
    reply = srv.initialize(root, {"debounceMs": 0})
    assert "capabilities" in reply["result"]
    srv.wait_for(lambda m: m.get("method") == "stitch/status", timeout=30)


def alive(srv: RawServer) -> dict[str, Any]:
    """The server answers a request after whatever came before."""
    reply = srv.call("stitch/debugInfo", {}, timeout=20)
    assert "result" in reply, reply
    assert srv.alive()
    return reply["result"]


INTERNALS = ("Traceback", "Error in server", "KeyError", "AttributeError", "TypeError")


def no_tracebacks(srv: RawServer) -> None:
    """Nothing the client was sent carries a traceback, and no pop-up speaks of internals
    (a pop-up about an invalid setting the storm sent is fine: it is the user's to fix)."""
    for msg in srv.drain():
        text = json.dumps(msg)
        assert "Traceback" not in text, msg
        if msg.get("method") == "window/showMessage":
            assert not any(word in text for word in INTERNALS), msg
        srv.seen.append(msg)


def hover(uri: str, line: Any = 0, character: Any = 0) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}


# ---- lifecycle ----------------------------------------------------------------------------------


def test_requests_before_initialize_get_32002_and_no_settings(
    server: RawServer, tmp_path: Path
) -> None:
    for method in ("stitch/debugInfo", "textDocument/hover", "shutdown", "workspace/symbol"):
        reply = server.call(method, {})
        assert reply["error"]["code"] == NOT_INITIALIZED, reply
        assert "settings" not in json.dumps(reply)
    server.notify("textDocument/didOpen", {"textDocument": {"uri": "file:///x.py"}})
    ready(server, tmp_path)
    info = alive(server)
    assert info["documents"] == []  # the early didOpen was dropped, not half-applied
    second = server.call("initialize", {"capabilities": {}})
    assert second["error"]["code"] == INVALID_REQUEST
    no_tracebacks(server)


def test_exit_without_shutdown_exits_1(server: RawServer, tmp_path: Path) -> None:
    ready(server, tmp_path)
    server.notify("exit")
    assert server.proc.wait(15) == 1


def test_shutdown_then_exit_exits_0_and_refuses_requests_between(
    server: RawServer, tmp_path: Path
) -> None:
    ready(server, tmp_path)
    assert server.call("shutdown")["result"] is None
    late = server.call("textDocument/hover", hover("file:///x.py"))
    assert late["error"]["code"] == INVALID_REQUEST
    server.notify("exit")
    assert server.proc.wait(15) == 0


def test_exit_right_after_shutdown_without_waiting_is_0(server: RawServer, tmp_path: Path) -> None:
    ready(server, tmp_path)
    server.request("shutdown")
    server.notify("exit")
    assert server.proc.wait(15) == 0


def test_shutdown_while_still_starting_up(server: RawServer, tmp_path: Path) -> None:
    """`initialized` is still at work (devices, warm-up) when `shutdown` cancels it: the reply
    is null, not an internal error, and `exit` then ends with 0."""
    server.call("initialize", {"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
    server.notify("initialized", {})
    assert server.call("shutdown") == {"id": server._next_id, "jsonrpc": "2.0", "result": None}
    server.notify("exit")
    assert server.proc.wait(15) == 0


def test_end_of_input_ends_the_server(server: RawServer, tmp_path: Path) -> None:
    ready(server, tmp_path)
    assert server.proc.stdin is not None
    server.proc.stdin.close()
    server.proc.wait(15)


# ---- params -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        {},
        None,
        [],
        "x",
        hover("file:///a.py", -1, 0),
        hover("file:///a.py", 0, -5),
        hover("file:///a.py", 2**40, 0),
        hover("file:///a.py", 0, 2**63),
        {"textDocument": None, "position": {"line": 0, "character": 0}},
    ],
    ids=repr,
)
def test_invalid_hover_params_get_32602(server: RawServer, tmp_path: Path, params: Any) -> None:
    ready(server, tmp_path)
    msg_id = server._next_id + 1
    server.send({"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover", "params": params})
    server._next_id = msg_id
    reply = server.response(msg_id)
    assert reply["error"]["code"] == INVALID_PARAMS, reply
    alive(server)
    no_tracebacks(server)


def test_positions_past_the_end_answer_quietly(server: RawServer, tmp_path: Path) -> None:
    ready(server, tmp_path)
    uri = (tmp_path / "m.py").as_uri()
    server.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": PY}},
    )
    for line, char in ((2**31 - 1, 0), (0, 2**31 - 1), (3, 10_000)):
        reply = server.call("textDocument/hover", hover(uri, line, char))
        assert "result" in reply, reply
    for method in ("textDocument/codeLens", "textDocument/documentSymbol"):
        assert "result" in server.call(method, {"textDocument": {"uri": uri}})
    assert "result" in server.call(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": uri},
            "range": {
                "start": {"line": 2**31 - 1, "character": 0},
                "end": {"line": 0, "character": 0},
            },
            "context": {"diagnostics": []},
        },
    )
    no_tracebacks(server)


def test_unknown_methods_and_bad_commands(server: RawServer, tmp_path: Path) -> None:
    ready(server, tmp_path)
    assert server.call("no/such/method", {})["error"]["code"] == METHOD_NOT_FOUND
    server.notify("no/such/notification", {})
    bad = server.call(
        "workspace/executeCommand", {"command": "stitch.generate", "arguments": [{"no": 1}]}
    )
    assert bad["error"]["code"] == INVALID_PARAMS
    assert "Traceback" not in json.dumps(bad) and "traceback" not in json.dumps(bad)
    unknown = server.call("workspace/executeCommand", {"command": "rm -rf", "arguments": []})
    assert "error" in unknown
    alive(server)
    no_tracebacks(server)


def test_did_change_on_an_unopened_document_is_logged(server: RawServer, tmp_path: Path) -> None:
    ready(server, tmp_path)
    server.notify(
        "textDocument/didChange",
        {
            "textDocument": {"uri": (tmp_path / "ghost.py").as_uri(), "version": 2},
            "contentChanges": [{"text": "x = 1\n"}],
        },
    )
    log = server.wait_for(
        lambda m: (
            m.get("method") == "window/logMessage" and "never opened" in m["params"]["message"]
        )
    )
    assert "KeyError" not in log["params"]["message"]
    alive(server)
    no_tracebacks(server)


# ---- framing ------------------------------------------------------------------------------------

FRAMING_CASES: dict[str, bytes] = {
    "content-length too small": frame(
        {"jsonrpc": "2.0", "id": 1, "method": "textDocument/hover", "params": {}}, length=20
    ),
    "content-length too large": frame({"jsonrpc": "2.0", "method": "initialized"}, length=60),
    "content-length huge": b"Content-Length: 99999999999999999999\r\n\r\n{}",
    "content-length negative": b"Content-Length: -5\r\n\r\n{}",
    "content-length not a number": b"Content-Length: lots\r\n\r\n{}",
    "content-length zero": b"Content-Length: 0\r\n\r\n",
    "junk before a header": b"\x00\xff garbage \r\n\r\nmore garbage",
    "a long line without a newline": b"x" * 200_000,
    "body not json": frame(b"{not json at all"),
    "body not utf-8": frame(b'{"jsonrpc": "2.0", "method": "\xff\xfe"}'),
    "body is an array": frame(b"[1, 2, 3]"),
    "body is a number": frame(b"42"),
    "no jsonrpc field": frame({"id": 5, "method": "textDocument/hover", "params": {}}),
    "wrong jsonrpc version": frame({"jsonrpc": "1.0", "id": 6, "method": "shutdown"}),
    "method not a string": frame({"jsonrpc": "2.0", "id": 7, "method": 12}),
    "deeply nested json": frame(b'{"jsonrpc": "2.0", "method": "x", "params": ' + b"[" * 5000),
    "headers only, other case": b"content-length: 2\r\ncontent-type: x\r\n\r\n{}",
    "two messages in one write": frame({"jsonrpc": "2.0", "method": "initialized"}) * 2,
}


@pytest.mark.parametrize("case", sorted(FRAMING_CASES))
def test_broken_framing_leaves_the_server_answering(
    server: RawServer, tmp_path: Path, case: str
) -> None:
    ready(server, tmp_path)
    server.write(FRAMING_CASES[case])
    alive(server)
    no_tracebacks(server)


def test_a_request_cut_short_still_gets_an_answer(server: RawServer, tmp_path: Path) -> None:
    """A body shorter than its Content-Length (the client stalls): the server stops waiting,
    and since the request it held is readable it is answered."""
    ready(server, tmp_path)
    body = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "stitch/debugInfo", "params": {}})
    server.write(f"Content-Length: {len(body) + 40}\r\n\r\n{body}".encode())
    reply = server.response(99, timeout=20)
    assert "result" in reply
    no_tracebacks(server)


def test_a_request_with_broken_json_gets_a_parse_error(server: RawServer, tmp_path: Path) -> None:
    ready(server, tmp_path)
    server.write(frame(b'{"jsonrpc": "2.0", "id": 123, "method": "x", "params": {'))
    reply = server.response(123)
    assert reply["error"]["code"] == PARSE_ERROR
    alive(server)


# ---- random -------------------------------------------------------------------------------------


def _random_message(rng: random.Random, uri: str) -> bytes:
    methods = [
        "textDocument/hover",
        "textDocument/didChange",
        "textDocument/codeLens",
        "textDocument/didOpen",
        "textDocument/didClose",
        "workspace/executeCommand",
        "textDocument/documentSymbol",
        "$/cancelRequest",
        "$/setTrace",
        "workspace/didChangeConfiguration",
    ]
    values: list[Any] = [None, 0, -1, 2**33, "", "x" * 50, [], {}, True, 1.5, {"uri": uri}]
    msg: dict[str, Any] = {"jsonrpc": "2.0", "method": rng.choice(methods)}
    if rng.random() < 0.6:
        msg["id"] = rng.randint(1, 10**6)
    msg["params"] = rng.choice(
        [
            rng.choice(values),
            {"textDocument": {"uri": uri, "version": rng.choice(values)}},
            {
                "textDocument": {"uri": uri},
                "position": {"line": rng.choice(values), "character": 0},
            },
            {"textDocument": {"uri": uri}, "contentChanges": [{"text": rng.choice(["", "x"])}]},
            {"settings": {"stitch": {"debounceMs": rng.choice(values)}}},
            {"command": rng.choice(["stitch.profile", "stitch.verify", "x"]), "arguments": [1]},
            {"id": rng.choice(values)},
        ]
    )
    data = json.dumps(msg).encode()
    roll = rng.random()
    if roll < 0.1:
        return frame(data, length=max(0, len(data) - rng.randint(1, 10)))
    if roll < 0.15:
        return frame(data, length=len(data) + rng.randint(1, 10))
    if roll < 0.2:
        return bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    return frame(data)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_message_storm(server: RawServer, tmp_path: Path, seed: int) -> None:
    ready(server, tmp_path)
    uri = (tmp_path / "m.py").as_uri()
    server.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": PY}},
    )
    rng = random.Random(seed)
    for _ in range(300):
        server.write(_random_message(rng, uri))
    info = alive(server)
    assert info["pendingHandlers"] <= 8
    no_tracebacks(server)
