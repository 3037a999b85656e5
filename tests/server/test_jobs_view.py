"""The jobs view and cancel, through the real server: `stitch/jobs` and `stitch.cancel`.

A cancel must end the worker's whole process group (the worker and what it started) and the
cancelled job must write nothing.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp

from tests.server.lsp_client import (
    SERVER_NO_GPU,
    StitchClient,
    _plain,
    initialize,
    open_file,
    wait_until,
)

REPO = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose: it runs nothing.
    try:
        status = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return status != "Z"


async def execute(client: StitchClient, command: str, *args: object) -> Any:
    return _plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command=command, arguments=list(args))
        )
    )


async def list_jobs(client: StitchClient) -> list[dict[str, Any]]:
    return _plain(await client.protocol.send_request_async("stitch/jobs", {}))["jobs"]


def pids_in(path: Path) -> list[int]:
    if not path.is_file():
        return []
    return [int(x) for x in path.read_text().split()]


async def test_a_cpu_job_is_listed_with_its_stage_and_cancel_kills_its_process_group(
    fake_client: StitchClient, tmp_path: Path
) -> None:
    await initialize(fake_client, tmp_path)
    uri = await open_file(fake_client, tmp_path / "m.py", "x = 1\n")
    pid_file = tmp_path / "grandchild.pid"
    run = asyncio.ensure_future(execute(fake_client, "test.job", uri, 60, False, str(pid_file)))
    await wait_until(lambda: pid_file.is_file() and pid_file.read_text().strip(), 20)
    grandchild = int(pid_file.read_text())

    jobs = await list_jobs(fake_client)
    assert len(jobs) == 1, jobs
    job = jobs[0]
    assert (job["kind"], job["file"], job["state"], job["stage"]) == (
        "fake",
        "m.py",
        "running",
        "sleeping",
    )
    assert job["device"] is None and job["elapsedS"] >= 0
    # The same list was pushed as a notification.
    assert any(j and j[0]["id"] == job["id"] for j in fake_client.job_lists)

    result = await execute(fake_client, "stitch.cancel", {"id": job["id"]})
    assert result["cancelled"] == [job["id"]]
    outcome = await asyncio.wait_for(run, 20)
    assert outcome["state"] == "cancelled"
    assert outcome["message"] == "cancelled from the editor"
    await wait_until(lambda: not alive(grandchild), 10)
    # The view emptied.
    await wait_until(lambda: fake_client.job_lists and fake_client.job_lists[-1] == [], 5)


async def test_cancel_is_offered_untrusted_and_with_nothing_running(
    fake_client: StitchClient, tmp_path: Path
) -> None:
    result = await initialize(fake_client, tmp_path, trusted=False)
    commands = result.capabilities.execute_command_provider.commands
    assert "stitch.cancel" in commands
    assert await execute(fake_client, "stitch.cancel") == {"cancelled": []}


@pytest_lsp.fixture(config=SERVER_NO_GPU)
async def no_gpu_client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


@pytest.mark.skipif(shutil.which("sh") is None, reason="needs a POSIX shell for the fake worker")
async def test_cancelling_generate_kills_the_worker_group_and_writes_nothing(
    no_gpu_client: StitchClient, tmp_path: Path
) -> None:
    """Generate with a worker Python that hangs (and starts a child, as nvcc would)."""
    client = no_gpu_client
    client.apply_edits_to_disk = True
    pids = tmp_path / "worker.pids"
    fake_python = tmp_path / "slow-python"
    fake_python.write_text(
        # It answers the launcher's version probe, then hangs as a worker.
        '#!/bin/sh\ncase "$*" in *version_info*) echo True; exit 0;; *find_spec*) exit 0;; esac\n'
        f'echo $$ >> "{pids}"\nsleep 300 &\necho $! >> "{pids}"\nwait\n'
    )
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IXUSR)
    reference = tmp_path / "layernorm_gelu.py"
    shutil.copy(REPO / "examples" / "layernorm_gelu.py", reference)

    await initialize(
        client,
        tmp_path,
        settings={"coder": "builtin"},
        # User-level (a workspace may not name a program), and unconfined: the test reads the
        # host pids the fake Python writes.
        user_settings={"pythonForWorkers": str(fake_python), "sandbox": "none"},
    )
    uri = await open_file(client, reference)
    run = asyncio.ensure_future(execute(client, "stitch.generate", uri))
    await wait_until(lambda: len(pids_in(pids)) >= 2, 30)
    worker, child = pids_in(pids)[:2]
    listed = await list_jobs(client)
    assert [(j["kind"], j["file"], j["stage"]) for j in listed] == [
        ("generate", "layernorm_gelu.py", "Planning")
    ]

    assert (await execute(client, "stitch.cancel", {"uri": uri}))["cancelled"] == [listed[0]["id"]]
    outcome = await asyncio.wait_for(run, 30)
    assert outcome["state"] == "cancelled", outcome
    await wait_until(lambda: not alive(worker) and not alive(child), 10)
    assert sorted(p.name for p in tmp_path.glob("*.py")) == ["layernorm_gelu.py"]
    assert client.applied_edits == []
