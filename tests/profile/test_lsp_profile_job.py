"""`stitch.profile` through the real server and its GPU job scheduler, with stand-in tools.

A stand-in `nvidia-smi` makes the server see one GPU, and a stand-in `ncu` writes the shared
real report; the rest is real: the scheduler job, the worker subprocess, the nvcc build with
-lineinfo, reading and mapping the report, publishing, and the content-hash cache.
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

pytest_lsp = pytest.importorskip("pytest_lsp")

from lsprotocol import types as lsp  # noqa: E402

from tests.conftest import NCU_FIXTURES  # noqa: E402
from tests.profile.test_lsp_profile import PY_MODEL, ncu_lines  # noqa: E402
from tests.server.lsp_client import (  # noqa: E402
    SERVER_COMMAND,
    StitchClient,
    _plain,
    initialize,
    make_client,
    open_file,
    wait_for_diagnostics,
    wait_until,
)

REPORT = NCU_FIXTURES / "relu_bias_full.ncu-rep"
_BIN = Path(tempfile.mkdtemp(prefix="stitch-fake-tools-"))
(_BIN / "ncu").write_text(
    f"#!{sys.executable}\n"
    "import os, shutil, sys\n"
    "args = sys.argv[1:]\n"
    "open(os.environ['FAKE_NCU_LOG'], 'a').write(' '.join(args) + '\\n')\n"
    "shutil.copy(os.environ['FAKE_NCU_REPORT'], args[args.index('--export') + 1] + '.ncu-rep')\n"
)
(_BIN / "nvidia-smi").write_text(
    "#!/bin/sh\n"
    'case "$*" in *compute_cap*) echo 9.0 ;; *) echo "GPU 0: NVIDIA H200 (UUID: x)";; esac\n'
)
for tool in ("ncu", "nvidia-smi"):
    (_BIN / tool).chmod(0o755 | stat.S_IEXEC)
NCU_LOG = _BIN / "ncu.log"
ENV = {
    **os.environ,
    "PATH": f"{_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    "FAKE_NCU_REPORT": str(REPORT),
    "FAKE_NCU_LOG": str(NCU_LOG),
    # The stand-in ncu logs its calls to a file outside the job, which the sandbox forbids.
    "STITCH_SANDBOX": "none",
}
ENV.pop("CUDA_VISIBLE_DEVICES", None)
CONFIG = pytest_lsp.ClientServerConfig(
    server_command=SERVER_COMMAND, client_factory=make_client, server_env=ENV
)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH"),
    pytest.mark.skipif(not REPORT.is_file(), reason=f"shared report missing: {REPORT}"),
]


@pytest_lsp.fixture(config=CONFIG)
async def job_client(lsp_client: StitchClient):
    yield
    await lsp_client.shutdown_session()


async def _profile(client: StitchClient, uri: str) -> dict:
    return _plain(
        await client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="stitch.profile", arguments=[uri])
        )
    )


async def test_profile_job_publishes_and_caches(job_client: StitchClient, tmp_path: Path) -> None:
    body = PY_MODEL.split('r"""\n', 1)[1].split('"""')[0]
    main = "\nint main() { return 0; }\n"
    cu_text = body.replace("#include <torch/extension.h>", "#include <cstdio>").split(
        "torch::Tensor"
    )[0]
    await initialize(job_client, tmp_path, settings={"debounceMs": 0})
    uri = await open_file(job_client, tmp_path / "relu_bias.cu", cu_text + main)
    await wait_for_diagnostics(job_client, uri, version=1)

    first = await _profile(job_client, uri)
    assert first["ok"] and not first["cached"], first
    args = NCU_LOG.read_text().splitlines()[-1]
    assert "--import-source yes" in args and "--clock-control none" in args
    assert "--kernel-name regex:^(relu_bias)$" in args
    await wait_until(lambda: ncu_lines(job_client.diagnostics.get(uri, [])), 10)
    body_line = next(i for i, ln in enumerate(cu_text.splitlines(), 1) if "if(i<n)" in ln)
    assert {"CPIStall", "FPInstructions"} <= ncu_lines(job_client.diagnostics[uri])[body_line]

    runs = len(NCU_LOG.read_text().splitlines())
    again = await _profile(job_client, uri)
    assert again["ok"] and again["cached"], again
    assert len(NCU_LOG.read_text().splitlines()) == runs  # served from the content-hash cache


async def test_profile_on_save(job_client: StitchClient, tmp_path: Path) -> None:
    """stitch.profileOnSave: saving the file queues a profile; its findings get published."""
    body = PY_MODEL.split('r"""\n', 1)[1].split('"""')[0]
    cu_text = (
        body.replace("#include <torch/extension.h>", "#include <cstdio>").split("torch::Tensor")[0]
        + "\nint main() { return 0; }\n"
    )
    await initialize(job_client, tmp_path, settings={"debounceMs": 0, "profileOnSave": True})
    path = tmp_path / "relu_bias.cu"
    uri = await open_file(job_client, path, cu_text)
    await wait_for_diagnostics(job_client, uri, version=1)
    assert not ncu_lines(job_client.diagnostics.get(uri, []))
    job_client.text_document_did_save(
        lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri))
    )
    await wait_until(lambda: ncu_lines(job_client.diagnostics.get(uri, [])), 30)
    body_line = next(i for i, ln in enumerate(cu_text.splitlines(), 1) if "if(i<n)" in ln)
    assert "CPIStall" in ncu_lines(job_client.diagnostics[uri])[body_line]
