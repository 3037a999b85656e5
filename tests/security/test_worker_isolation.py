"""No worker imports a module from the workspace in place of a library (issue 17, security 1).

The workspace holds files named like the libraries the server and its workers import
(`torch.py`, `ncu_report.py`, `pydantic.py`, a `stitch_lsp/` package, `sitecustomize.py`, ...);
each writes a marker file when imported. Every kind of worker runs with that workspace as its
working folder (and the server is started inside it), and no marker may appear.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest
from lsprotocol import types as lsp

from stitch_lsp.config import Settings
from stitch_lsp.models.profile import ProfileRun, ReportRequest
from stitch_lsp.workers import WORKER_ENTRY_POINTS
from stitch_lsp.workers.launch import WorkerCall, run_worker, worker_command, worker_environment

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

DATA = Path(__file__).resolve().parents[1] / "verify" / "data"
SHADOWS = (
    "torch",
    "numpy",
    "ncu_report",
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "triton",
    "sympy",
    "json",
    "lsprotocol",
    "pygls",
    "openai",
    "rich",
    "tree_sitter",
    "sitecustomize",
    "usercustomize",
)


@pytest.fixture
def hostile(tmp_path: Path) -> tuple[Path, Path]:
    """(workspace, marker folder): a workspace whose every module leaves a marker if imported."""
    ws, marks = tmp_path / "ws", tmp_path / "marks"
    ws.mkdir()
    marks.mkdir()

    def trap(name: str) -> str:
        return f"open({str(marks / name)!r}, 'w').write('imported')\n"

    for name in SHADOWS:
        (ws / f"{name}.py").write_text(trap(name))
    pkg = ws / "stitch_lsp"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(trap("stitch_lsp"))
    for name in ("ref_bias_relu.py", "cand_good.py"):
        shutil.copy(DATA / name, ws / name)
    return ws, marks


def _marks(marks: Path) -> list[str]:
    return sorted(p.name for p in marks.iterdir())


def test_the_worker_command_line_is_isolated() -> None:
    argv = worker_command(None, "stitch_lsp.verify.worker.main", ["a", "b"])
    assert argv[1:4] == ["-E", "-u", "-B"]
    if sys.version_info >= (3, 11):
        assert "-P" in argv
    assert "-m" not in argv  # the module runs through the bootstrap, never from the cwd
    env = worker_environment({"PYTHONPATH": "relative/dir:/abs/dir"})
    assert env["STITCH_WORKER_PATH"] == "/abs/dir"  # relative entries would mean the cwd


def test_verify_worker(hostile: tuple[Path, Path]) -> None:
    from stitch_lsp.verify import verify

    ws, marks = hostile
    res = verify(ws / "ref_bias_relu.py", ws / "cand_good.py", Settings(), compile_only=True)
    assert res.phase == "done", (res.message, res.log_tail)
    assert _marks(marks) == []


def test_profile_worker_reading_a_report(hostile: tuple[Path, Path], ncu_fixture_dir: Path) -> None:
    ws, marks = hostile
    call = WorkerCall(
        WORKER_ENTRY_POINTS["profile"],
        ReportRequest(report=str(ncu_fixture_dir / "relu_bias_full.ncu-rep")),
        ProfileRun,
        timeout_s=120,
        cwd=ws,
    )
    run = run_worker(call).result
    assert run.ok and run.report is not None and run.report.kernels, run.error
    assert _marks(marks) == []


def test_profiled_program(hostile: tuple[Path, Path]) -> None:
    """The program ncu runs: it imports the file it profiles by path, nothing beside it."""
    import subprocess

    ws, marks = hostile
    argv = worker_command(None, WORKER_ENTRY_POINTS["profile-target"], ["cand_good.py"])
    env = worker_environment({"CUDA_VISIBLE_DEVICES": ""})
    out = subprocess.run(argv, cwd=ws, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 3, out.stderr[-2000:]  # no GPU visible: stops before running
    assert _marks(marks) == []


def test_planner_worker(hostile: tuple[Path, Path]) -> None:
    from stitch_lsp.agents.planner import analyze_reference

    ws, marks = hostile
    analysis = analyze_reference(ws / "ref_bias_relu.py", Settings())
    assert analysis.ops
    assert _marks(marks) == []


def test_builtin_generator(hostile: tuple[Path, Path]) -> None:
    from stitch_lsp.compiler import generate_candidate

    ws, marks = hostile
    cand = generate_candidate(ws / "ref_bias_relu.py", Settings())
    assert cand.handled, cand.reason
    assert _marks(marks) == []


async def test_scheduler_worker(hostile: tuple[Path, Path], ncu_fixture_dir: Path) -> None:
    from stitch_lsp.server.jobs import JobContext, JobScheduler, JobSpec

    ws, marks = hostile
    call = WorkerCall(
        WORKER_ENTRY_POINTS["profile"],
        ReportRequest(report=str(ncu_fixture_dir / "relu_bias_full.ncu-rep")),
        ProfileRun,
        timeout_s=120,
        cwd=ws,
    )

    async def run(ctx: JobContext) -> ProfileRun:
        return (await ctx.run_worker(call)).result

    outcome = await JobScheduler([]).submit(JobSpec(kind="x", run=run, needs_gpu=False)).wait()
    assert outcome.ok and outcome.result.ok, outcome.message
    assert _marks(marks) == []


@pytest.mark.parametrize("launch", ["stitch-lsp", "python -m"])
async def test_untrusted_show_profile_from_a_server_started_in_the_workspace(
    hostile: tuple[Path, Path], ncu_fixture_dir: Path, launch: str
) -> None:
    """The case from the issue: a plain stdio client starts the server inside the project.

    With `python -m stitch_lsp`, Python itself looks in the working folder first, so a
    `stitch_lsp/` folder there would be run instead of the server; what the server imports after
    that is safe (README: start it as `stitch-lsp serve`)."""
    from tests.server.lsp_client import initialize, make_client

    ws, marks = hostile
    client = make_client()
    if launch == "stitch-lsp":
        script = Path(sys.executable).with_name("stitch-lsp")
        await client.start_io(str(script), "serve", cwd=str(ws))
    else:
        shutil.rmtree(ws / "stitch_lsp")
        await client.start_io(sys.executable, "-m", "stitch_lsp", "serve", cwd=str(ws))
    try:
        await initialize(client, ws, trusted=False)
        report = ncu_fixture_dir / "relu_bias_full.ncu-rep"
        result = await asyncio.wait_for(
            client.workspace_execute_command_async(
                lsp.ExecuteCommandParams(
                    command="stitch.showProfile",
                    arguments=[{"uri": (ws / "cand_good.py").as_uri(), "report": str(report)}],
                )
            ),
            120,
        )
        assert result["ok"], result
    finally:
        await client.shutdown_session()
    assert _marks(marks) == []
