"""The editor path: `stitch.cluster` set, the real server on a machine without a GPU."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig

from stitch_lsp.cluster.session import LOOPBACK_ENV
from tests.cluster.conftest import FAKE_GPUS
from tests.server.lsp_client import (
    REPO,
    SERVER_COMMAND,
    StitchClient,
    initialize,
    make_lens_client,
    open_file,
    wait_for_diagnostics,
    wait_until,
)

DATA = REPO / "tests" / "verify" / "data"

pytestmark = pytest.mark.slow

SERVER_NO_GPU_CLUSTER = ClientServerConfig(
    server_command=SERVER_COMMAND,
    client_factory=make_lens_client,
    server_env={
        **os.environ,
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONPATH": str(REPO),
        LOOPBACK_ENV: "0",  # the tests' head is on 127.0.0.1 only
        # The head asks for its token (~/.ray/auth_token, written when the tests started it),
        # as any client of a Ray cluster with token authentication must.
        "RAY_AUTH_MODE": "token",
    },
)


@pytest_lsp.fixture(config=SERVER_NO_GPU_CLUSTER)
async def client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


def _address() -> str:
    import ray

    return str(ray.get_runtime_context().gcs_address)


def _clusters(client: StitchClient) -> list[dict[str, Any]]:
    return [s["cluster"] for s in client.statuses if "cluster" in s]


async def _verify(client: StitchClient, uri: str) -> dict[str, Any]:
    return await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="stitch.verify", arguments=[uri])
    )


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
async def test_verify_runs_on_the_cluster_and_the_status_bar_shows_it(
    ray_head: object, client: StitchClient, tmp_path: Path
) -> None:
    address = _address()
    await initialize(
        client, tmp_path, settings={"debounceMs": 0}, user_settings={"cluster": address}
    )
    await wait_until(lambda: bool(_clusters(client)), 30)
    assert _clusters(client)[-1] == {
        "address": address,
        "gpus": FAKE_GPUS,
        "freeGpus": FAKE_GPUS,
    }
    pair = tmp_path / "pair_good.py"
    pair.write_text((DATA / "pair_good.py").read_text())
    uri = await open_file(client, pair, pair.read_text())
    res = await _verify(client, uri)
    # Full verification was asked for although this machine has no GPU; it ran on a cluster GPU
    # (a Ray resource only, here, so the worker built the candidate and could not run it).
    assert res["compileOnly"] is False, res
    assert res["status"] == "no_gpu", res
    assert res["device"].rsplit("/", 1)[-1] in {f"gpu{i}" for i in range(FAKE_GPUS)}, res
    # After the job the status bar is told the GPUs are free again.
    await wait_until(lambda: _clusters(client)[-1]["freeGpus"] == FAKE_GPUS, 15)
    running = [s for s in client.statuses if s["state"] == "running"]
    assert running and all("cluster" in s for s in running)


async def test_an_untrusted_workspace_sends_nothing_to_the_cluster(
    ray_head: object, client: StitchClient, tmp_path: Path
) -> None:
    result = await initialize(
        client,
        tmp_path,
        settings={"debounceMs": 0},
        user_settings={"cluster": _address()},
        trusted=False,
    )
    assert "stitch.verify" not in (result.capabilities.execute_command_provider.commands or [])
    pair = tmp_path / "pair_good.py"
    uri = await open_file(client, pair, (DATA / "pair_good.py").read_text())
    await wait_for_diagnostics(client, uri, version=1)
    assert _clusters(client) == []
    assert any("not trusted: nothing is sent" in m.message for m in client.log_messages)


async def test_a_workspace_cannot_send_code_to_a_cluster(
    ray_head: object, client: StitchClient, tmp_path: Path
) -> None:
    """`cluster` in ordinary (workspace-level) settings is ignored: no connection is made."""
    await initialize(client, tmp_path, settings={"debounceMs": 0, "cluster": _address()})
    await wait_until(lambda: any("stitch.cluster" in m.message for m in client.log_messages), 15)
    assert _clusters(client) == []
    assert any("never from a workspace" in m.message for m in client.log_messages)
