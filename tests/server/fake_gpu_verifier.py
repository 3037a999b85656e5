"""A test feature module (via STITCH_EXTRA_FEATURES): one pretend GPU and a scripted Verifier.

The server-side wiring of a *passing* verify (lens one-liner, profile speedup, `stitch/status`)
cannot run on a machine without a GPU; this module pins a device and replaces
`stitch_lsp.verify.verify` in the server process with a function that returns a fixed
`passed` result, so that wiring is tested everywhere. The real Verifier has its own tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import stitch_lsp.verify
from stitch_lsp.models.verify import VerifyResult, VerifyStatus
from stitch_lsp.server.app import StitchServer
from stitch_lsp.server.features.common import VerifiedSpeedups

CALLS: list[dict[str, Any]] = []


def scripted_verify(reference: Path, candidate: Path, settings: Any, **kw: Any) -> VerifyResult:
    seen = {k: v for k, v in kw.items() if k in ("device", "compile_only")}
    CALLS.append({"reference": str(reference), "candidate": str(candidate), **seen})
    return VerifyResult(
        status=VerifyStatus.passed,
        reference=str(reference),
        candidate=str(candidate),
        speedup_vs_eager=1.32,
        speedup_vs_compile=1.1,
    )


async def speedups(ls: StitchServer, *args: Any) -> dict[str, Any]:
    return {"speedups": sorted(ls.store(VerifiedSpeedups).values()), "calls": CALLS}


def register(server: StitchServer) -> None:
    server.pin_devices(["cuda:0"])
    stitch_lsp.verify.verify = scripted_verify  # type: ignore[assignment]
    server.register_command("test.verifyCalls", speedups, executes_code=False)
