"""`stitch/results`: the results panel's data, through the real server.

The profile runs with stand-in `ncu` and `nvidia-smi` (they write the repository's real relu_bias
report) and a stand-in worker Python that only answers the import step, so the whole path (the
job profiling the candidate and then its reference, storing both, answering the request) runs
without a GPU. Attempt rows come from trajectory records in the project's schema.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp

from stitch_lsp.agents.trajectory import record
from stitch_lsp.models.agents import Attempt, CoderStage, Rubric, RubricItem, Verdict
from tests.profile.test_lsp_profile import PY_MODEL
from tests.profile.test_lsp_profile_job import CONFIG, NCU_LOG, REPORT
from tests.server.lsp_client import StitchClient, _plain, initialize, open_file

REFERENCE = """import torch


class Model(torch.nn.Module):
    def forward(self, x, b):
        return torch.relu(x + b)


def get_inputs():
    return [torch.randn(64, 32), torch.randn(32)]


def get_init_inputs():
    return []
"""
CANDIDATE = (
    "# stitch-lsp: reference=ref.py\n"
    + PY_MODEL
    + "ext = load_inline(name='rb', cpp_sources='torch::Tensor fused(torch::Tensor x, "
    "torch::Tensor b);', cuda_sources=src, functions=['fused'])\n\n\n"
    "class ModelNew(torch.nn.Module):\n"
    "    def forward(self, x, b):\n"
    "        return ext.fused(x, b)\n\n\n"
    "def get_inputs():\n    return [torch.randn(64, 32), torch.randn(32)]\n\n\n"
    "def get_init_inputs():\n    return []\n"
)


def write_trajectory(folder: Path, code: str) -> None:
    item = RubricItem(score=4)
    rubric = Rubric(anti_hacking=item, engineering=item, coverage=item, compliance=item)
    rows = []
    for index, status, speedup in ((1, "incorrect", None), (2, "passed", 1.42)):
        attempt = Attempt(
            index=index,
            stage=CoderStage.draft if index == 1 else CoderStage.repair_correctness,
            coder="builtin",
            code=code if index == 2 else "# wrong\n",
            verdict=Verdict(status=status, speedup=speedup, speedup_vs_compile=speedup and 1.1),
            rubric=rubric,
            rubric_total=16,
            reward=2.1 if index == 2 else 0.0,
            accepted=index == 2,
        )
        rows.append(
            record(
                attempt,
                run_id="run-1",
                messages=[],
                reply="",
                reference="ref.py",
                model=None,
                verify_mode="full",
            )
        )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest_lsp.fixture(config=CONFIG)
async def job_client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


async def results(client: StitchClient, uri: str) -> dict[str, Any]:
    return _plain(await client.protocol.send_request_async("stitch/results", {"uri": uri}))


async def lenses(client: StitchClient, uri: str) -> list[tuple[int, str, str]]:
    found = await client.text_document_code_lens_async(
        lsp.CodeLensParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    return [(x.range.start.line, x.command.title, x.command.command) for x in found or []]


@pytest.mark.skipif(not REPORT.is_file(), reason="the ncu fixture is missing")
async def test_results_hold_attempts_verify_kernels_and_roofline(
    job_client: StitchClient, tmp_path: Path
) -> None:
    worker_python = tmp_path / "worker-python"  # answers the import step; ncu is a stand-in
    worker_python.write_text("#!/bin/sh\nexit 0\n")
    worker_python.chmod(worker_python.stat().st_mode | stat.S_IXUSR)
    (tmp_path / "ref.py").write_text(REFERENCE)
    write_trajectory(tmp_path / ".stitch" / "trajectories", CANDIDATE)
    await initialize(
        job_client,
        tmp_path,
        settings={"debounceMs": 0},
        user_settings={"pythonForWorkers": str(worker_python)},  # a workspace cannot name it
    )
    uri = await open_file(job_client, tmp_path / "ref_stitch.py", CANDIDATE)

    before = await results(job_client, uri)
    assert before["role"] == "candidate" and before["reference"] == str(tmp_path / "ref.py")
    assert before["kernels"] == [] and before["roofs"]["source"].startswith("H200")
    assert before["referenceLabel"] == "ref.py"  # as the workspace names it
    assert any("not profiled yet" in n for n in before["notes"])

    done = _plain(
        await job_client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="stitch.profile", arguments=[uri])
        )
    )
    assert done["ok"], done
    # One ncu run per `--clock-control` (a target's command line may span lines).
    runs = [r.strip() for r in NCU_LOG.read_text().split("--clock-control")[-2:]]
    assert "ref_stitch.py" in runs[0] and "--kernel-name regex:^(relu_bias)$" in runs[0]
    # The reference's Model ran under ncu as well, with every kernel it launches.
    assert runs[1].endswith(f"{tmp_path / 'ref.py'} --class Model"), runs[1]
    assert "--kernel-name regex:." in runs[1]

    after = await results(job_client, uri)
    sides = [(k["name"], k["side"]) for k in after["kernels"]]
    assert sides == [("relu_bias", "candidate"), ("relu_bias", "reference")]
    kernel = after["kernels"][0]
    assert kernel["durationUs"] == pytest.approx(56.256)
    assert kernel["arithmeticIntensity"] == pytest.approx(0.1448, rel=1e-3)
    assert kernel["gflops"] == pytest.approx(298.2, rel=1e-3)
    # One roof for every view: the H200's measured bandwidth; ncu's nominal peak only named.
    roofs = after["roofs"]
    assert roofs["source"] == "NVIDIA H200: measured bandwidth; datasheet FLOP/s"
    assert roofs["peakGbS"] == pytest.approx(4120.0) and roofs["peakGflops"] == 67000.0
    assert roofs["ncuPeakGbS"] == pytest.approx(4807.3, rel=1e-3)
    assert after["report"] and not after["profileStale"]

    attempts = after["attempts"]
    assert [(a["attempt"], a["status"], a["thisFile"]) for a in attempts] == [
        (1, "incorrect", False),
        (2, "passed", True),
    ]
    assert attempts[1]["speedupVsEager"] == 1.42 and attempts[1]["rubric"] == 16
    assert attempts[1]["reward"] == 2.1 and attempts[1]["stage"] == "repair_correctness"

    # The reference shows the same runs.
    ref_uri = await open_file(job_client, tmp_path / "ref.py")
    ref = await results(job_client, ref_uri)
    assert ref["role"] == "reference" and len(ref["attempts"]) == 2
    assert not any(a["thisFile"] for a in ref["attempts"])


async def test_show_results_lens_only_for_clients_that_have_the_command(
    client: StitchClient, tmp_path: Path
) -> None:
    (tmp_path / "ref.py").write_text(REFERENCE)
    await initialize(client, tmp_path)
    uri = await open_file(client, tmp_path / "ref_stitch.py", CANDIDATE)
    assert not [x for x in await lenses(client, uri) if x[2] == "stitch.showResults"]


async def test_show_results_lens_on_model_new(client: StitchClient, tmp_path: Path) -> None:
    (tmp_path / "ref.py").write_text(REFERENCE)
    await initialize(client, tmp_path, options={"clientCommands": ["stitch.showResults"]})
    uri = await open_file(client, tmp_path / "ref_stitch.py", CANDIDATE)
    line = CANDIDATE.splitlines().index("class ModelNew(torch.nn.Module):")
    shown = [x for x in await lenses(client, uri) if x[2] == "stitch.showResults"]
    assert shown == [(line, "Show results", "stitch.showResults")]
    # A reference gets the lens only once runs on it were recorded.
    ref_uri = await open_file(client, tmp_path / "ref.py")
    assert not [x for x in await lenses(client, ref_uri) if x[2] == "stitch.showResults"]


async def test_a_report_shown_for_a_file_fills_its_results(
    client: StitchClient, tmp_path: Path, ncu_fixture_dir: Path
) -> None:
    await initialize(client, tmp_path)
    uri = await open_file(client, tmp_path / "ref_stitch.py", CANDIDATE.replace("ref.py", "x.py"))
    shown = _plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                command="stitch.showProfile",
                arguments=[{"uri": uri, "report": str(ncu_fixture_dir / "relu_bias_full.ncu-rep")}],
            )
        )
    )
    assert shown["ok"], shown
    after = await results(client, uri)
    assert [(k["name"], k["side"]) for k in after["kernels"]] == [("relu_bias", "candidate")]
    assert after["roofs"]["peakGbS"] == pytest.approx(4120.0)
    assert after["report"].endswith("relu_bias_full.ncu-rep")
    assert any("reference's kernels are not on the chart" in n for n in after["notes"])

    # A report of the reference goes beside the candidate's kernels (the roofline's squares).
    shown = _plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(
                command="stitch.showProfile",
                arguments=[{"uri": uri, "side": "reference",
                            "report": str(ncu_fixture_dir / "relu_bias_full.ncu-rep")}],
            )
        )
    )  # fmt: skip
    assert shown["ok"], shown
    both = await results(client, uri)
    assert [(k["name"], k["side"]) for k in both["kernels"]] == [
        ("relu_bias", "candidate"),
        ("relu_bias", "reference"),
    ]
    assert both["kernels"][1]["gflops"] == pytest.approx(298.2, rel=1e-3)
    assert not any("reference's kernels are not on the chart" in n for n in both["notes"])
