"""One base for every message the editor reads: camelCase, and never a bare NaN (JSON has none,
and the client's JSON.parse throws on one)."""

from __future__ import annotations

import importlib
import inspect
import json
import math
import pkgutil
from typing import Any

from pydantic import BaseModel

import stitch_lsp.models
from stitch_lsp.models.base import WireModel
from stitch_lsp.models.commands import ProfileCommandResult, VerifyCommandResult
from stitch_lsp.models.editor import (
    AttemptRow,
    JobsParams,
    JobView,
    KernelRow,
    ResultsResponse,
    Roofs,
    VerifySummary,
)
from stitch_lsp.models.profile import KernelSummary
from stitch_lsp.models.server import StatusParams
from stitch_lsp.server.app import create_server


def _models() -> list[type[BaseModel]]:
    out: list[type[BaseModel]] = []
    for info in pkgutil.iter_modules(stitch_lsp.models.__path__, "stitch_lsp.models."):
        module = importlib.import_module(info.name)
        out += [
            c
            for _, c in inspect.getmembers(module, inspect.isclass)
            if issubclass(c, BaseModel) and c.__module__ == info.name
        ]
    return out


def test_every_camel_case_model_is_a_wire_model() -> None:
    camel = [m for m in _models() if m.model_config.get("alias_generator") is not None]
    assert len(camel) > 15
    assert [m.__name__ for m in camel if not issubclass(m, WireModel)] == []


def _summary(x: float) -> KernelSummary:
    return KernelSummary(
        name="k",
        duration_us=x,
        block=(256, 1, 1),
        grid=(8, 1, 1),
        top_stalls=[],
        bottleneck="memory",
        bottleneck_reason="",
        hints=[],
    )


def _messages(x: float) -> list[WireModel]:
    """One of each kind the editor reads, with `x` in a float field of each."""
    return [
        ResultsResponse(
            uri="file:///w/c.py",
            file="c.py",
            role="candidate",
            attempts=[
                AttemptRow(run_id="r", attempt=1, stage="s", status="ok", speedup_vs_eager=x)
            ],
            verify=VerifySummary(status="passed", title="t", message="", max_abs_error=x),
            kernels=[KernelRow(name="k", side="candidate", duration_us=x, gflops=x)],
            roofs=Roofs(peak_gflops=x, peak_gb_s=1.0, source="ncu"),
        ),
        JobsParams(jobs=[JobView(id=1, kind="verify", title="t", state="running", submitted_at=x)]),
        StatusParams(state="done", message="m", speedup=x),
        ProfileCommandResult(ok=True, kernels=[_summary(x)]),
        VerifyCommandResult(ok=True, speedup_vs_eager=x),
    ]


def test_no_message_carries_a_bare_nan_or_infinity() -> None:
    for x, token in ((math.nan, '"NaN"'), (math.inf, '"Infinity"'), (-math.inf, '"-Infinity"')):
        for message in _messages(x):
            text = json.dumps(message.to_wire(), allow_nan=False)  # raises on a bare NaN
            assert token in text, type(message).__name__


def test_finite_messages_are_what_they_were() -> None:
    """For finite numbers the JSON route gives exactly what `model_dump(mode="json")` gave, which
    the jobs list and the results panel sent before they shared the base."""
    for message in _messages(1.5):
        assert message.to_wire() == message.model_dump(mode="json", by_alias=True)
        assert message.to_wire(exclude_none=True) == message.model_dump(
            mode="json", by_alias=True, exclude_none=True
        )


def test_the_status_notification_sends_nan_as_a_string() -> None:
    server = create_server(devices=[], feature_modules=[])
    sent: list[tuple[str, Any]] = []
    server.protocol.notify = lambda method, params=None: sent.append((method, params))  # type: ignore[method-assign]
    server.send_status("done", "verified", speedup=math.nan)
    method, params = sent[-1]
    assert method == "stitch/status"
    assert params == {"state": "done", "message": "verified", "speedup": "NaN"}
    json.dumps(params, allow_nan=False)
