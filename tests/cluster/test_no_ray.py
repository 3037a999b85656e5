"""The local path never imports Ray: not the server, not the CLI, not a local verify run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

IMPORT_ALL = """
import importlib, pkgutil, sys
import stitch_lsp
from stitch_lsp.workers import runs_in_worker
for info in pkgutil.walk_packages(stitch_lsp.__path__, "stitch_lsp."):
    if not runs_in_worker(info.name) and info.name != "stitch_lsp.__main__":
        importlib.import_module(info.name)
from stitch_lsp.cli.main import build_parser
from stitch_lsp.server.app import create_server
build_parser()
create_server()
loaded = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray."))
assert not loaded, loaded
print("no ray")
"""


def test_importing_every_server_module_and_building_the_server_imports_no_ray() -> None:
    out = subprocess.run(
        [sys.executable, "-c", IMPORT_ALL],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0 and "no ray" in out.stdout, out.stderr[-3000:]


RUN_LOCAL = """
import sys
from stitch_lsp.cli.main import main
rc = main(sys.argv[1:])
loaded = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray."))
print("rc", rc, "ray modules:", loaded)
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_a_local_verify_run_imports_no_ray(tmp_path: Path) -> None:
    pair = tmp_path / "pair_good.py"
    shutil.copy(REPO / "tests" / "verify" / "data" / "pair_good.py", pair)
    env = {k: v for k, v in os.environ.items() if not k.startswith("STITCH_")}
    env["STITCH_CACHE_DIR"] = str(tmp_path / "build")
    out = subprocess.run(
        [sys.executable, "-c", RUN_LOCAL, "verify", str(pair), str(pair), "--compile-only"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
        check=False,
    )
    assert "ray modules: []" in out.stdout, out.stdout[-2000:] + out.stderr[-3000:]
    assert "rc 0" in out.stdout or "rc 1" in out.stdout, out.stdout[-2000:]
