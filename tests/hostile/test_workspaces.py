"""The real server in a hostile workspace: a FIFO or /dev/zero as the reference a header names,
binary files, a huge file, a report opened from `/`, files with lone CRs, and a workspace
Python cannot import torch from. The server keeps answering throughout, and says what it
skipped."""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.hostile.rpc import RawServer

TESTS = Path(__file__).resolve().parents[1]
CANDIDATE = """# stitch-lsp: reference={ref}
import torch
from torch.utils.cpp_extension import load_inline

src = r'''
__global__ void k(float* y, int n) {{ int i = threadIdx.x; if (i < n) y[i] = 0.5f; }}
'''
ext = load_inline(name="k", cpp_sources="", cuda_sources=src)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        ext.k(y, x.numel())
        return y
"""
SMALL = (
    "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[RawServer]:
    srv = RawServer(tmp_path)  # started inside the workspace, as Neovim or any plain client is
    srv.initialize(tmp_path, {"debounceMs": 0})
    srv.wait_for(lambda m: m.get("method") == "stitch/status", timeout=60)
    try:
        yield srv
    finally:
        srv.close()


def open_doc(srv: RawServer, path: Path, text: str | None = None, lang: str = "python") -> str:
    uri = path.as_uri()
    if text is None:
        text = path.read_bytes().decode("utf-8", "replace")
    srv.notify(
        "textDocument/didOpen",
        {"textDocument": {"uri": uri, "languageId": lang, "version": 1, "text": text}},
    )
    return uri


def diagnostics(srv: RawServer, uri: str, timeout: float = 60) -> list[dict[str, Any]]:
    msg = srv.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
        ),
        timeout=timeout,
    )
    return msg["params"]["diagnostics"]


def answers_quickly(srv: RawServer, uri: str, within_s: float) -> None:
    """Another document's symbols come back while the server has work on its hands."""
    started = time.monotonic()
    reply = srv.call("textDocument/documentSymbol", {"textDocument": {"uri": uri}}, timeout=60)
    assert "result" in reply
    assert time.monotonic() - started < within_s


@pytest.mark.parametrize("target", ["fifo", "/dev/zero", "loop", "folder"])
def test_a_reference_that_is_not_a_file_never_blocks(
    server: RawServer, tmp_path: Path, target: str
) -> None:
    if target == "fifo":
        os.mkfifo(tmp_path / "ref.py")
        ref = "ref.py"
    elif target == "loop":
        (tmp_path / "ref.py").symlink_to("ref.py")
        ref = "ref.py"
    elif target == "folder":
        (tmp_path / "ref").mkdir()
        ref = "ref"
    else:
        ref = target
    small = open_doc(server, tmp_path / "small.py", SMALL)
    diagnostics(server, small)
    cand = tmp_path / "cand.py"
    cand.write_text(CANDIDATE.format(ref=ref))
    uri = open_doc(server, cand)
    diagnostics(server, uri, timeout=30)
    answers_quickly(server, small, 10)
    hover = server.call(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 11, "character": 8}},
        timeout=30,
    )
    assert "result" in hover


def test_binary_files_get_one_notice_and_do_not_hold_others_up(
    server: RawServer, tmp_path: Path
) -> None:
    small = open_doc(server, tmp_path / "small.py", SMALL)
    diagnostics(server, small)
    rng = random.Random(5)
    blob = bytes(rng.randrange(256) for _ in range(1_000_000))
    (tmp_path / "noise.cu").write_bytes(blob)
    uri = open_doc(server, tmp_path / "noise.cu", lang="cuda-cpp")
    answers_quickly(server, small, 10)
    found = diagnostics(server, uri, timeout=30)
    assert [d["code"] for d in found] == ["stitch.binary-file"]
    text = "x = 1\n" + "\x00" * 64 + "\n"
    nul = open_doc(server, tmp_path / "nul.py", text)
    assert [d["code"] for d in diagnostics(server, nul)] == ["stitch.binary-file"]


@pytest.mark.slow
def test_a_large_file_is_analysed_off_the_loop(server: RawServer, tmp_path: Path) -> None:
    small = open_doc(server, tmp_path / "small.py", SMALL)
    diagnostics(server, small)
    parts = [p.read_text() for p in sorted((TESTS / "data" / "kernelbench").rglob("*.py"))]
    big = ""
    while len(big) < 2_000_000:
        big += "\n".join(parts)
    (tmp_path / "big.py").write_text(big)
    uri = open_doc(server, tmp_path / "big.py", big)
    answers_quickly(server, small, 5)
    diagnostics(server, uri, timeout=120)
    info = server.call("stitch/debugInfo", {})["result"]
    doc = next(d for d in info["documents"] if d["uri"] == uri)
    assert doc["analysisCount"] >= 1 and doc["syntaxTrees"] == 0  # parsed on a snapshot


def test_lone_cr_line_ends_and_empty_blocks_parse(server: RawServer, tmp_path: Path) -> None:
    cr = open_doc(server, tmp_path / "cr.py", SMALL.replace("\n", "\r"))
    assert not [d for d in diagnostics(server, cr) if d["code"] == "stitch.parse-error"]
    cu = open_doc(server, tmp_path / "k.cu", "__global__ void k(){{}}\n", "cuda-cpp")
    assert not [d for d in diagnostics(server, cu) if d["code"] == "stitch.parse-error"]


def test_a_report_opened_from_the_root_does_not_walk_the_disk(
    server: RawServer, tmp_path: Path
) -> None:
    small = open_doc(server, tmp_path / "small.py", SMALL)
    diagnostics(server, small)
    report = TESTS / "fixtures" / "ncu" / "relu_bias_full.ncu-rep"
    server.answer_server_requests()
    msg_id = server.request(
        "workspace/executeCommand",
        {
            "command": "stitch.showProfile",
            "arguments": [{"uri": "file:///x.py", "report": str(report)}],
        },
    )
    answers_quickly(server, small, 10)
    reply = server.response(msg_id, timeout=120)
    assert "result" in reply, reply


def test_a_damaged_report_gives_a_clean_message(server: RawServer, tmp_path: Path) -> None:
    from tests.hostile.ncu_corrupt import variants

    blob = dict(variants((TESTS / "fixtures" / "ncu" / "relu_bias_full.ncu-rep").read_bytes()))
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(blob["truncated-50pct"])
    reply = server.call(
        "workspace/executeCommand",
        {"command": "stitch.showProfile", "arguments": [{"uri": None, "report": str(bad)}]},
        timeout=120,
    )
    result = reply["result"]
    assert result["ok"] is False and "damaged or truncated" in result["message"]
    shown = server.wait_for(lambda m: m.get("method") == "window/showMessage", timeout=10)
    assert "Traceback" not in shown["params"]["message"]
    assert "validation error" not in shown["params"]["message"]


def test_without_torch_for_the_workers_the_editor_says_torch_is_missing(tmp_path: Path) -> None:
    no_torch = tmp_path / "python-without-torch"
    no_torch.write_text(f'#!/bin/sh\nexec "{sys.executable}" -S "$@"\n')  # -S: no site-packages
    no_torch.chmod(0o755)
    # The server's own environment: a workspace cannot name the workers' Python.
    srv = RawServer(tmp_path, env={"STITCH_PYTHON_FOR_WORKERS": str(no_torch)})
    try:
        srv.initialize(tmp_path)
        status = srv.wait_for(lambda m: m.get("method") == "stitch/status", timeout=60)
        assert "torch is missing" in status["params"]["message"]
        assert "no GPU" not in status["params"]["message"]
        log = srv.wait_for(
            lambda m: (
                m.get("method") == "window/logMessage"
                and "torch is missing" in m["params"]["message"]
            ),
            timeout=10,
        )
        assert "pythonForWorkers" in log["params"]["message"]
    finally:
        srv.close()


def test_a_workspace_full_of_shadowing_module_names_runs_nothing(tmp_path: Path) -> None:
    """Started inside the workspace (as a plain stdio client starts it), untrusted: files named
    like the modules the server and its workers import are never imported."""
    marker = tmp_path / "EXECUTED"
    payload = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("ncu_report.py", "json.py", "typing.py", "pydantic.py", "torch.py"):
        (tmp_path / name).write_text(payload)
    srv = RawServer(tmp_path)
    try:
        srv.call(
            "initialize",
            {
                "processId": None,
                "rootUri": tmp_path.as_uri(),
                "capabilities": {},
                "initializationOptions": {"trusted": False},
            },
        )
        srv.notify("initialized", {})
        srv.wait_for(lambda m: m.get("method") == "stitch/status", timeout=60)
        uri = open_doc(srv, tmp_path / "small.py", SMALL)
        diagnostics(srv, uri)
        report = TESTS / "fixtures" / "ncu" / "relu_bias_full.ncu-rep"
        reply = srv.call(
            "workspace/executeCommand",
            {"command": "stitch.showProfile", "arguments": [{"uri": uri, "report": str(report)}]},
            timeout=120,
        )
        assert "result" in reply, reply
    finally:
        srv.close()
    assert not marker.exists(), marker.read_text()


def test_workspace_settings_that_point_outside_are_not_used(tmp_path: Path) -> None:
    srv = RawServer(tmp_path)
    try:
        srv.initialize(
            tmp_path,
            {"llmBaseUrl": "http://attacker.invalid/v1", "llmApiKeyEnv": "AWS_SECRET_ACCESS_KEY"},
        )
        srv.wait_for(lambda m: m.get("method") == "stitch/status", timeout=60)
        settings = srv.call("stitch/debugInfo", {})["result"]["settings"]
        assert settings["llmBaseUrl"] != "http://attacker.invalid/v1"
        assert settings["llmApiKeyEnv"] != "AWS_SECRET_ACCESS_KEY"
    finally:
        srv.close()
