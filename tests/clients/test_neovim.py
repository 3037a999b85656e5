"""A second, independent LSP client: headless Neovim drives the real server over stdio."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
FIXTURES = REPO / "client-vscode" / "test" / "fixtures"
NVIM = shutil.which("nvim")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        NVIM is None,
        reason="nvim not found (apt-get install -y neovim): the Neovim client test needs it",
    ),
]


def run_nvim(file: Path, tmp_path: Path) -> dict:
    out = tmp_path / "nvim-result.json"
    env = {
        **os.environ,
        "STITCH_PYTHON": sys.executable,
        "STITCH_NVIM_FILE": str(file),
        "STITCH_NVIM_ROOT": str(file.parent),
        "STITCH_NVIM_OUT": str(out),
        "HOME": str(tmp_path),  # no user config, shada or swap files from the real home
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "XDG_DATA_HOME": str(tmp_path / "data"),
    }
    proc = subprocess.run(
        [NVIM, "--headless", "--clean", "-n", "-c", f"luafile {HERE / 'nvim_client.lua'}"],
        env=env,
        cwd=file.parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.is_file(), (
        f"nvim wrote no result (exit {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    )
    return json.loads(out.read_text())


def test_neovim_gets_diagnostics_and_code_actions(tmp_path: Path) -> None:
    result = run_nvim(FIXTURES / "model_new_fallback.py", tmp_path)
    assert result["errors"] == [], result
    assert result["filetype"] == "python"

    codes = {d["code"] for d in result["diagnostics"]}
    assert "stitch.torch-fallback" in codes, result["diagnostics"]
    fallback = next(d for d in result["diagnostics"] if d["code"] == "stitch.torch-fallback")
    assert (fallback["line"], fallback["severity"]) == (37, 1)  # 0-based line; 1 = error

    # The status bar notification reaches a client that never heard of it, in the documented shape.
    assert result["statuses"], "no stitch/status notification"
    assert result["statuses"][0]["state"] in {"idle", "running", "done", "error"}

    # At the fallback inside ModelNew the server offers to optimize it; every command it puts in
    # an action is one it advertised.
    assert result["code_action_provider"], "the server advertises no code actions"
    assert isinstance(result["code_actions"], list), result
    for action in result["code_actions"]:
        if action["command"] is not None:
            assert action["command"] in result["commands"], action
    titles = {a["title"]: a["command"] for a in result["code_actions"]}
    assert titles.get("Optimize with profiler feedback") == "stitch.optimize", titles

    assert result["exit_code"] == 0, "the server did not exit cleanly after shutdown"
