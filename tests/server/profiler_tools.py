"""Servers that see a GPU, with and without Nsight Compute: stand-in tools on PATH.

`nvidia-smi` lists one H200 (GPU discovery runs it); `ncu` exists only in the first folder and
is never run by the tests that use these configs (they only ask what the server offers).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from pytest_lsp import ClientServerConfig

from tests.server.lsp_client import SERVER_COMMAND, make_client

_ROOT = Path(tempfile.mkdtemp(prefix="stitch-profiler-tools-"))
GPU_ONLY = _ROOT / "gpu"
GPU_AND_NCU = _ROOT / "gpu-ncu"
_SMI = (
    "#!/bin/sh\n"
    'case "$*" in *compute_cap*) echo 9.0 ;; *) echo "GPU 0: NVIDIA H200 (UUID: x)";; esac\n'
)
_NCU = "#!/bin/sh\nexit 1\n"
for folder, tools in (
    (GPU_ONLY, {"nvidia-smi": _SMI}),
    (GPU_AND_NCU, {"nvidia-smi": _SMI, "ncu": _NCU}),
):
    folder.mkdir()
    for name, script in tools.items():
        (folder / name).write_text(script)
        (folder / name).chmod(0o755 | stat.S_IEXEC)


def _env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.pop("STITCH_NCU_PATH", None)
    return env


SERVER_WITH_PROFILER = ClientServerConfig(
    server_command=SERVER_COMMAND, client_factory=make_client, server_env=_env(GPU_AND_NCU)
)
"""A GPU and an ncu on PATH: the profile lens and actions are offered."""

SERVER_GPU_WITHOUT_NCU = ClientServerConfig(
    server_command=SERVER_COMMAND, client_factory=make_client, server_env=_env(GPU_ONLY)
)
"""A GPU, but no ncu: nothing offers a profile."""
