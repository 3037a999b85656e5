"""Hostile workspace files and clients, each run against the real server with the loop watchdog
on: FIFOs, `/dev/stdin` and `/dev/zero` where trajectories, a file to export or profile, or a
reference are read; a 1 GB reference; file-watch storms; a `load_inline` string of 20,000
kernels; keystrokes in a 50 MB file. Each case returns what the server answered and the longest
event-loop block it saw while serving (`stitch/debugInfo`). The tests assert on these
(`test_loop_cases.py`); `benchmarks/hostile_loop.py` prints them.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.hostile.rpc import RawServer

REFERENCE = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
"""
CANDIDATE = """# stitch-lsp: reference={ref}
import torch
from stitch_lsp.runtime import load_cuda

ext = load_cuda("k", r'''
__global__ void k(float* y, int n) {{ int i = threadIdx.x; if (i < n) y[i] = 0.5f; }}
''')


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        ext.k(y, x.numel())
        return y
"""
SMALL = (
    "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
)


@dataclass
class Outcome:
    """What one case saw: the server's answers, the longest loop block, how long it took."""

    name: str
    max_lag_ms: float = 0.0
    worst_during: str | None = None
    seconds: float = 0.0
    answers: dict[str, Any] = field(default_factory=dict)


def start(folder: Path, settings: dict[str, Any] | None = None) -> RawServer:
    """The server on stdio in `folder`, trusted, with the results lens declared, ready."""
    srv = RawServer(folder, {"STITCH_LOOP_WATCHDOG": "1"})
    srv.call(
        "initialize",
        {
            "processId": None,
            "rootUri": folder.as_uri(),
            "capabilities": {},
            "initializationOptions": {
                "settings": {"debounceMs": 0, **(settings or {})},
                "trusted": True,
                "clientCommands": ["stitch.showResults"],
            },
        },
        timeout=60,
    )
    srv.notify("initialized", {})
    srv.wait_for(lambda m: m.get("method") == "stitch/status", timeout=60)
    return srv


def open_doc(srv: RawServer, path: Path, text: str, lang: str = "python") -> str:
    uri = path.as_uri()
    doc = {"uri": uri, "languageId": lang, "version": 1, "text": text}
    srv.notify("textDocument/didOpen", {"textDocument": doc})
    return uri


def command(srv: RawServer, name: str, *arguments: Any, timeout: float = 60) -> dict[str, Any]:
    return srv.call(
        "workspace/executeCommand", {"command": name, "arguments": list(arguments)}, timeout
    )


def still_answers(srv: RawServer, uri: str, within_s: float = 10.0) -> float:
    """Seconds a hover on `uri` took; the server must answer it."""
    t0 = time.monotonic()
    reply = srv.call(
        "textDocument/hover",
        {"textDocument": {"uri": uri}, "position": {"line": 3, "character": 8}},
        timeout=within_s,
    )
    assert "result" in reply, reply
    return time.monotonic() - t0


def loop_figures(srv: RawServer) -> dict[str, Any]:
    info = srv.call("stitch/debugInfo", {}, timeout=60)["result"]
    return dict(info["loop"] or {}) | {"watchedFiles": info.get("watchedFiles")}


def hostile_file(path: Path, kind: str) -> None:
    """`path` as a FIFO, or a symlink to /dev/stdin or /dev/zero."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(kind)


# ---- the cases ----------------------------------------------------------------------------------


def trajectories(srv: RawServer, folder: Path, kind: str) -> dict[str, Any]:
    """A committed `.stitch/trajectories/x.jsonl` that is a FIFO, /dev/stdin or /dev/zero:
    the results lens and stitch/results read the folder."""
    hostile_file(folder / ".stitch" / "trajectories" / "x.jsonl", kind)
    (folder / "ref.py").write_text(REFERENCE)
    ref = open_doc(srv, folder / "ref.py", REFERENCE)
    cand = open_doc(srv, folder / "cand.py", CANDIDATE.format(ref="ref.py"))
    lenses = srv.call("textDocument/codeLens", {"textDocument": {"uri": ref}}, timeout=30)
    results = srv.call("stitch/results", {"uri": cand}, timeout=30)["result"]
    return {
        "lenses": lenses.get("result"),
        "notes": results["notes"],
        "hover_s": still_answers(srv, ref),
    }


def export_standalone(srv: RawServer, folder: Path, kind: str) -> dict[str, Any]:
    """exportStandalone (offered untrusted too) on a `.py` that is not a regular file."""
    target = folder / "gen.py"
    hostile_file(target, kind)
    small = open_doc(srv, folder / "small.py", SMALL)
    reply = command(srv, "stitch.exportStandalone", target.as_uri(), timeout=30)
    return {"reply": reply, "hover_s": still_answers(srv, small)}


def profile_cu(srv: RawServer, folder: Path, kind: str) -> dict[str, Any]:
    """stitch.profile on a `.cu` file that is a FIFO or /dev/zero."""
    target = folder / "k.cu"
    hostile_file(target, kind)
    small = open_doc(srv, folder / "small.py", SMALL)
    reply = command(srv, "stitch.profile", target.as_uri(), timeout=30)
    return {"reply": reply, "hover_s": still_answers(srv, small)}


def verify_huge_reference(srv: RawServer, folder: Path) -> dict[str, Any]:
    """stitch.verify against a 1 GB (sparse) reference."""
    with open(folder / "big.py", "wb") as fh:
        fh.truncate(1 << 30)
    cand = folder / "cand.py"
    text = CANDIDATE.format(ref="big.py")
    cand.write_text(text)
    uri = open_doc(srv, cand, text)
    reply = command(srv, "stitch.verify", uri, timeout=60)
    return {"reply": reply, "hover_s": still_answers(srv, uri)}


BAD_PATHS = ("missing.py", "pipe.py", "folder.py", "dangling.py", "zero.py")


def bad_paths(srv: RawServer, folder: Path) -> dict[str, Any]:
    """profile, generate and optimize on paths that are missing, a FIFO, a folder, a dangling
    symlink or /dev/zero."""
    os.mkfifo(folder / "pipe.py")
    (folder / "folder.py").mkdir()
    (folder / "dangling.py").symlink_to(folder / "gone.py")
    (folder / "zero.py").symlink_to("/dev/zero")
    out: dict[str, Any] = {}
    for name in ("stitch.profile", "stitch.generate", "stitch.optimize"):
        for target in BAD_PATHS:
            out[f"{name} {target}"] = command(srv, name, (folder / target).as_uri(), timeout=30)
    return out


def watched_storm(
    srv: RawServer, folder: Path, changes: int, docs: int, under: str
) -> dict[str, Any]:
    """`changes` watched-file changes in one notification, with `docs` documents open that
    name references (each change may concern any of them)."""
    (folder / "ref.py").write_text(REFERENCE)
    uris = [
        open_doc(srv, folder / f"cand_{i}.py", CANDIDATE.format(ref="ref.py")) for i in range(docs)
    ]
    srv.call("stitch/debugInfo", {}, timeout=60)  # every open handled
    base = folder / under if under else folder
    events = [
        {"uri": (base / f"pkg_{i % 97}" / f"m_{i}.py").as_uri(), "type": 2} for i in range(changes)
    ]
    events.append({"uri": (folder / "ref.py").as_uri(), "type": 2})
    srv.notify("workspace/didChangeWatchedFiles", {"changes": events})
    hover_s = still_answers(srv, uris[0])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        figures = loop_figures(srv)["watchedFiles"]
        if figures and figures["pending"] == 0 and figures["passes"] >= 1:
            break
        time.sleep(0.1)
    return {"hover_s": hover_s, "watched": figures}


def many_kernels(srv: RawServer, folder: Path, kernels: int = 20_000) -> dict[str, Any]:
    """A `load_inline` source string holding `kernels` kernels."""
    body = "\n".join(
        f"__global__ void k{i}(float* y) {{ y[{i}] = {i}.0f; }}" for i in range(kernels)
    )
    text = (
        "from torch.utils.cpp_extension import load_inline\n"
        f'src = r"""\n{body}\n"""\n'
        'ext = load_inline(name="m", cpp_sources="", cuda_sources=src)\n'
    )
    small = open_doc(srv, folder / "small.py", SMALL)
    uri = open_doc(srv, folder / "many.py", text)
    hover_s = still_answers(srv, small, 30)
    symbols = srv.call("textDocument/documentSymbol", {"textDocument": {"uri": uri}}, timeout=120)
    return {"hover_s": hover_s, "symbols": len(symbols.get("result") or []), "bytes": len(text)}


def big_file_keystrokes(
    srv: RawServer, folder: Path, mb: int = 50, keys: int = 20
) -> dict[str, Any]:
    """`keys` one-character edits in a `mb` MB Python file (the loop figures count from the
    first key: opening 50 MB is its own cost)."""
    line = "x = 1  # padding padding padding padding padding padding padding padding\n"
    text = line * (mb * 1_000_000 // len(line))
    uri = open_doc(srv, folder / "big.py", text)
    small = open_doc(srv, folder / "small.py", SMALL)
    diagnostics = srv.wait_for(
        lambda m: (
            m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri
        ),
        timeout=120,
    )["params"]["diagnostics"]
    srv.call("stitch/debugInfo", {"resetLoop": True}, timeout=60)  # measure the keys alone
    for i in range(keys):
        pos = {"line": 1000 + i, "character": 0}
        srv.notify(
            "textDocument/didChange",
            {
                "textDocument": {"uri": uri, "version": 2 + i},
                "contentChanges": [{"range": {"start": pos, "end": pos}, "text": "y"}],
            },
        )
    hover_s = still_answers(srv, small, 30)
    info = srv.call("stitch/debugInfo", {}, timeout=60)["result"]
    doc = next(d for d in info["documents"] if d["uri"] == uri)
    return {"hover_s": hover_s, "diagnostics": diagnostics, "doc": doc}


CASES: dict[str, Callable[[RawServer, Path], dict[str, Any]]] = {
    "trajectories x.jsonl = FIFO": lambda s, f: trajectories(s, f, "fifo"),
    "trajectories x.jsonl -> /dev/stdin": lambda s, f: trajectories(s, f, "/dev/stdin"),
    "trajectories x.jsonl -> /dev/zero": lambda s, f: trajectories(s, f, "/dev/zero"),
    "exportStandalone on a FIFO": lambda s, f: export_standalone(s, f, "fifo"),
    "exportStandalone on /dev/zero": lambda s, f: export_standalone(s, f, "/dev/zero"),
    "profile a FIFO .cu": lambda s, f: profile_cu(s, f, "fifo"),
    "profile a /dev/zero .cu": lambda s, f: profile_cu(s, f, "/dev/zero"),
    "verify against a 1 GB reference": verify_huge_reference,
    "profile/generate/optimize on bad paths": bad_paths,
    "10,000 watched changes, 30 open": lambda s, f: watched_storm(s, f, 10_000, 30, ""),
    "20,000 watched changes in .venv, 10 open": lambda s, f: watched_storm(
        s, f, 20_000, 10, ".venv/lib/python3.11/site-packages"
    ),
    "load_inline string with 20,000 kernels": many_kernels,
    "keystrokes in a 50 MB file": big_file_keystrokes,
}


def run_case(name: str, folder: Path) -> Outcome:
    """One case on a fresh server in `folder`: its answers and its longest loop block."""
    srv = start(folder)
    try:
        t0 = time.monotonic()
        answers = CASES[name](srv, folder)
        seconds = time.monotonic() - t0
        time.sleep(0.2)  # work the case left behind (a publish, a pass) shows as well
        figures = loop_figures(srv)
        assert srv.alive(), srv.stderr()
        return Outcome(
            name, figures.get("maxLagMs", 0.0), figures.get("worstDuring"), seconds, answers
        )
    finally:
        srv.close()
