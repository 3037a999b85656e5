"""Wall time from the editor's "profile" command to the `ncu` diagnostics it publishes.

Drives the real server (`python -m stitch_lsp serve`) over stdio with pygls's client: open the
file, send `stitch.profile` with the default sections, wait for publishDiagnostics carrying
`ncu` findings; then the same with `{"full": true}` (`--set full`); then once more with the
default sections, which the content-hash cache answers. Usage (needs a GPU and ncu):

    python benchmarks/profile_lsp_wall.py examples/kernels/profile_uncoalesced.cu --out r.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient


async def run(path: Path, timeout: float) -> dict[str, Any]:
    client = LanguageClient("profile-bench", "0")
    published: list[tuple[float, lsp.PublishDiagnosticsParams]] = []
    event = asyncio.Event()

    @client.feature(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
    def on_diags(params: lsp.PublishDiagnosticsParams) -> None:
        published.append((time.perf_counter(), params))
        event.set()

    @client.feature(lsp.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def on_progress_create(params: Any) -> None:
        return None

    @client.feature(lsp.PROGRESS)
    def on_progress(params: Any) -> None:
        return None

    ready = asyncio.Event()

    @client.feature("stitch/status")
    def on_status(params: Any) -> None:
        state = params.get("state") if isinstance(params, dict) else getattr(params, "state", None)
        if state == "idle":
            ready.set()

    @client.feature(lsp.WINDOW_SHOW_MESSAGE)
    def on_message(params: lsp.ShowMessageParams) -> None:
        print("server says:", params.message, file=sys.stderr)

    await client.start_io(sys.executable, "-m", "stitch_lsp", "serve")
    root = path.resolve().parent
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(
                window=lsp.WindowClientCapabilities(work_done_progress=True)
            ),
            root_uri=root.as_uri(),
            initialization_options={"settings": {"debounceMs": 0}},
        )
    )
    client.initialized(lsp.InitializedParams())
    uri = path.resolve().as_uri()
    lang = "python" if path.suffix == ".py" else "cuda-cpp"
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(
            text_document=lsp.TextDocumentItem(
                uri=uri, language_id=lang, version=1, text=path.read_text()
            )
        )
    )
    # The server says "idle" once it has found the GPUs; profiling before that finds none.
    await asyncio.wait_for(ready.wait(), 30)

    async def timed(label: str, arg: Any) -> dict[str, Any]:
        published.clear()
        t0 = time.perf_counter()
        result = await asyncio.wait_for(
            client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(command="stitch.profile", arguments=[arg])
            ),
            timeout,
        )
        t_result = time.perf_counter() - t0
        while True:
            hits = [
                t
                for t, p in published
                if p.uri == uri and any(d.source == "ncu" for d in p.diagnostics)
            ]
            if hits:
                break
            event.clear()
            try:
                await asyncio.wait_for(event.wait(), 3)
            except asyncio.TimeoutError:
                break
        n = max(
            (sum(d.source == "ncu" for d in p.diagnostics) for _, p in published if p.uri == uri),
            default=0,
        )

        def field(name: str) -> Any:
            return result.get(name) if isinstance(result, dict) else getattr(result, name, None)

        return {
            "mode": label,
            "ok": bool(field("ok")),
            "cached": field("cached"),
            "worker_wall_s": field("wall_s"),
            "ncu_s": field("ncu_s"),
            "build_s": field("build_s"),
            "error": field("error"),
            "command_s": t_result,
            "to_published_s": (hits[0] - t0) if hits else None,
            "ncu_diagnostics": n,
        }

    out = [
        await timed("default", uri),
        await timed("full", {"uri": uri, "full": True}),
        await timed("default (cached)", uri),
    ]
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {"file": str(path), "runs": out}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("path", type=Path)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    doc = asyncio.run(run(args.path, args.timeout))
    if args.out:
        args.out.write_text(json.dumps(doc, indent=2))
    print(json.dumps(doc, indent=2))
    return 0 if all(r["to_published_s"] is not None for r in doc["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
