"""Does the language server give memory back? RSS while 300 files are opened and closed, round
after round, and the longest the event loop was blocked meanwhile.

A real `python -m stitch_lsp serve` over stdio: each round opens 300 distinct files (KernelBench
problems and the examples, each with its own comment so no two have the same content), waits for
their diagnostics, closes them all, waits for the empty diagnostics, and reads the server's RSS
from /proc. A server that keeps something per opened document grows round after round; a healthy
one levels off after the first rounds (caches filling up to their bounds).

Run: .venv/bin/python benchmarks/server_memory.py [--files 300] [--rounds 10] [--json out.json]
(PYTHONPATH=/path/to/other/checkout measures another version of the server.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.hostile.rpc import RawServer  # noqa: E402


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    raise RuntimeError("no VmRSS")


def sources() -> list[Path]:
    found = sorted((REPO / "tests" / "data" / "kernelbench").rglob("*.py"))
    found += sorted((REPO / "examples").rglob("*.py")) + sorted((REPO / "examples").rglob("*.cu"))
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="stitch-mem-") as tmp:
        root = Path(tmp)
        base = sources()
        files: list[tuple[Path, str, str]] = []
        for i in range(args.files):
            src = base[i % len(base)]
            lang = "cuda-cpp" if src.suffix == ".cu" else "python"
            comment = "//" if src.suffix == ".cu" else "#"
            path = root / f"f{i:04d}_{src.name}"
            text = f"{comment} copy {i}\n" + src.read_text(encoding="utf-8")
            path.write_text(text, encoding="utf-8")
            files.append((path, lang, text))

        env = {"STITCH_LOOP_WATCHDOG": "1", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        server = RawServer(root, env=env)
        server.initialize(root, {"debounceMs": 0})
        time.sleep(1.0)
        server.answer_server_requests()
        start_rss = rss_mb(server.proc.pid)
        rounds: list[dict[str, Any]] = []
        for r in range(1, args.rounds + 1):
            t0 = time.perf_counter()
            for path, lang, text in files:
                server.notify(
                    "textDocument/didOpen",
                    {"textDocument": {"uri": path.as_uri(), "languageId": lang, "version": r,
                                      "text": text}},
                )  # fmt: skip
            _wait_published(server, {p.as_uri() for p, _, _ in files}, version=r)
            for path, _, _ in files:
                server.notify("textDocument/didClose", {"textDocument": {"uri": path.as_uri()}})
            _wait_published(server, {p.as_uri() for p, _, _ in files}, version=None)
            info = server.call("stitch/debugInfo", {})["result"]
            rss = rss_mb(server.proc.pid)
            rounds.append(
                {"round": r, "rss_mb": round(rss, 2), "seconds": round(time.perf_counter() - t0, 2),
                 "open_documents": len(info["documents"])}
            )  # fmt: skip
            print(f"round {r:2d}: RSS {rss:7.2f} MB  ({rounds[-1]['seconds']} s)", flush=True)
        loop = server.call("stitch/debugInfo", {})["result"].get("loop")
        code = server.close()

    tail = rounds[2:] if len(rounds) > 3 else rounds
    slope = (tail[-1]["rss_mb"] - tail[0]["rss_mb"]) / max(1, len(tail) - 1)
    summary = {
        "files": args.files,
        "rounds": rounds,
        "start_rss_mb": round(start_rss, 2),
        "growth_mb_per_round_from_round_3": round(slope, 3),
        "loop": loop,
        "exit_code": code,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(f"start {start_rss:.2f} MB; growth from round 3 on: {slope:+.3f} MB per round")
    print(f"event loop: {loop}")
    if args.json:
        args.json.write_text(json.dumps(summary, indent=1))
    return 0


def _wait_published(server: RawServer, uris: set[str], *, version: int | None) -> None:
    """Until each uri got a publish of `version` (None: the empty one that follows didClose)."""
    left = set(uris)
    while left:
        msg = server.wait_for(
            lambda m: m.get("method") == "textDocument/publishDiagnostics", timeout=120
        )
        params = msg["params"]
        if version is None and params["diagnostics"]:
            continue
        if params["uri"] in left and params.get("version") == version:
            left.discard(params["uri"])


if __name__ == "__main__":
    sys.exit(main())
