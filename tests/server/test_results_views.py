"""The results panel's views: the plan and rubric of a compile-only run, the timeline, one roof
for every view, the reference's kernels beside the candidate's, the short finished toast, and
the profile offered only where it can run.

Records are written by the project's own writers (`trajectory.record` over the Coder's real
prompt); the timeline is one the verifier recorded on the H200; the report is the repository's
real H200 report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp

from stitch_lsp.agents.coder import CoderRequest, build_messages
from stitch_lsp.agents.hardware import default_target
from stitch_lsp.agents.planner import plan_from_analysis
from stitch_lsp.agents.trajectory import record
from stitch_lsp.models.agents import (
    Attempt,
    CoderStage,
    OpCost,
    ReferenceAnalysis,
    Rubric,
    RubricItem,
    RunResult,
    Verdict,
)
from stitch_lsp.models.verify import Timeline, TimelineReport
from stitch_lsp.server.features.generate import TOAST_CHARS, toast_text
from stitch_lsp.server.features.results import _attempt_row, _plan_of, plan_for, timelines_view
from tests.server.lsp_client import REPO, SERVER_NO_GPU, StitchClient, _plain, initialize, open_file
from tests.server.profiler_tools import SERVER_GPU_WITHOUT_NCU
from tests.server.test_results import CANDIDATE, REFERENCE

TIMELINE_FIXTURE = REPO / "client-vscode" / "test" / "fixtures" / "timeline-h200.json"
LAYERNORM = (REPO / "examples" / "layernorm_gelu.py").read_text()


def compile_only_record() -> dict[str, Any]:
    """Attempt 1 of a compile-only builtin run on layernorm_gelu.py, as the loop records it."""
    analysis = ReferenceAnalysis(
        ops=[
            OpCost(node="norm", op="LayerNorm", kind="call_module", bytes=1.3e8, line=18),
            OpCost(node="gelu", op="gelu", kind="call_function", bytes=1.3e8, line=19),
            OpCost(node="mul", op="mul", kind="call_function", bytes=1.3e8, line=20),
        ],
        hardware=default_target(),
    )
    plan = plan_from_analysis(analysis)
    messages = build_messages(
        CoderRequest(
            stage=CoderStage.draft,
            attempt=1,
            reference_name="layernorm_gelu.py",
            reference=LAYERNORM,
            plan=plan,
        )
    )
    rubric = Rubric(
        anti_hacking=RubricItem(
            score=4, reasons=["clean under the static checks; not run on a GPU"]
        ),
        engineering=RubricItem(score=5, reasons=["uses shared-memory tiles"]),
        coverage=RubricItem(score=5, reasons=["1 CUDA kernel(s)"]),
        compliance=RubricItem(score=5, reasons=["1 kernel(s) for 1 planned fusion group(s)"]),
    )
    attempt = Attempt(
        index=1,
        stage=CoderStage.draft,
        coder="builtin",
        code="# generated\n",
        verdict=Verdict(status="compiled", message="compile-only run requested"),
        rubric=rubric,
        rubric_total=rubric.total,
        accepted=True,
    )
    return record(attempt, run_id="run-c", messages=messages, reply="",
                  reference="layernorm_gelu.py", model=None, verify_mode="compile")  # fmt: skip


def test_plan_and_rubric_of_a_compile_only_attempt() -> None:
    rec = compile_only_record()
    plan = _plan_of(rec)
    assert plan is not None and plan.run_id == "run-c" and plan.revision == 0
    assert [g.ops for g in plan.groups] == [["norm", "gelu", "mul"]]
    assert plan.summary.startswith("1 fused kernel(s)")
    row = _attempt_row(rec, "# generated")
    assert row.this_file and row.status == "compiled" and row.rubric == 19
    assert [(i.name, i.score) for i in row.rubric_items] == [
        ("anti_hacking", 4), ("engineering", 5), ("coverage", 5), ("compliance", 5),
    ]  # fmt: skip
    assert row.rubric_items[0].reasons == ["clean under the static checks; not run on a GPU"]
    # The op lines the Planner found (kept at generate time) go beside each op.
    shown = plan_for([row], {("run-c", 1): plan}, {"norm": 18, "gelu": 19, "mul": 20})
    assert shown is not None and shown.groups[0].lines == [18, 19, 20]
    # A record without a plan in its prompt has none.
    assert _plan_of({**rec, "messages": [{"role": "user", "content": "no plan"}]}) is None


def test_timeline_from_the_recorded_h200_run_and_none_without_timing() -> None:
    recorded = json.loads(TIMELINE_FIXTURE.read_text())
    ref = Timeline.model_validate(recorded["reference"])
    view = timelines_view(TimelineReport(reference=ref), "NVIDIA H200", compile_only=False)
    wire = view.to_wire()
    assert wire["reference"]["windowMs"] == pytest.approx(0.1192, rel=1e-3)
    assert wire["reference"]["busyFraction"] == pytest.approx(0.55, rel=1e-2)
    assert wire["reference"]["gaps"] == pytest.approx(2.667, rel=1e-3)
    assert len(wire["reference"]["top"]) == 2 and wire["candidate"] is None
    # Compile-only: no timeline, and the reason in plain words.
    none = timelines_view(None, None, compile_only=True)
    assert none.reference is None and none.candidate is None
    assert none.note == "no timing: compile-only verification, no GPU here"


def _run(status: str, output: str | None, speedup: float | None = None) -> RunResult:
    attempt = Attempt(
        index=1, stage=CoderStage.draft, coder="builtin", code="x",
        verdict=Verdict(status=status, speedup=speedup, correct=status == "passed" or None),
    )  # fmt: skip
    return RunResult(
        reference="layernorm_gelu.py", verify_mode="compile", coder="builtin", stopped="compiled",
        attempts=[attempt], best_index=1, output=output,
        message="attempt 1 compiled and passed the static checks (rubric 19/20). Correctness "
        "and speed were NOT verified: compile-only verification, no GPU.",
    )  # fmt: skip


def test_the_finished_toast_is_short_with_the_verdict_first() -> None:
    text = toast_text(_run("compiled", "/home/dev/examples/layernorm_gelu_stitch.py"))
    assert text == "Compiled, NOT verified (no GPU): layernorm_gelu_stitch.py"
    assert len(text) <= TOAST_CHARS and "/home/dev" not in text
    passed = toast_text(_run("passed", "/w/a_stitch.py", 1.42))
    assert passed == "Verified, 1.42x over eager: a_stitch.py"
    long = toast_text(_run("compiled", "/w/" + "x" * 80 + ".py"))
    assert long.startswith("Compiled, NOT verified (no GPU): ") and len(long) == TOAST_CHARS
    failed = RunResult(reference="r.py", verify_mode="compile", coder="builtin", stopped="error",
                       message="torch is not installed for the workers")  # fmt: skip
    assert toast_text(failed) == "Failed: torch is not installed for the workers"


async def _lens_titles(client: StitchClient, uri: str) -> list[str]:
    found = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    return [x.command.title for x in found or [] if x.command]


@pytest_lsp.fixture(config=SERVER_NO_GPU)
async def no_gpu_client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


@pytest_lsp.fixture(config=SERVER_GPU_WITHOUT_NCU)
async def no_ncu_client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.slow
async def test_no_profile_lens_without_a_gpu(no_gpu_client: StitchClient, tmp_path: Path) -> None:
    (tmp_path / "ref.py").write_text(REFERENCE)
    await initialize(no_gpu_client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(no_gpu_client, tmp_path / "ref.py", REFERENCE)
    titles = await _lens_titles(no_gpu_client, uri)
    assert "Generate fused CUDA implementation" in titles
    assert "Profile with Nsight Compute" not in titles
    results = _plain(
        await no_gpu_client.protocol.send_request_async("stitch/results", {"uri": uri})
    )
    assert results["profiler"]  # the panel says why there is no profile


@pytest.mark.slow
async def test_no_profile_lens_without_ncu(no_ncu_client: StitchClient, tmp_path: Path) -> None:
    await initialize(no_ncu_client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(no_ncu_client, tmp_path / "ref_stitch.py", CANDIDATE)
    assert "Profile with Nsight Compute" not in await _lens_titles(no_ncu_client, uri)
    results = _plain(
        await no_ncu_client.protocol.send_request_async("stitch/results", {"uri": uri})
    )
    assert results["profiler"].startswith("ncu not found (ncu)")
