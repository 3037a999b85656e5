"""The seam: every server-side module imports without torch (or ncu_report, which is native).

Worker-side modules are those under a `worker/` package (`stitch_lsp.workers.WORKER_PACKAGES`);
every other module under stitch_lsp is imported here in a fresh interpreter, and the server is
built with all its feature modules.
"""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import stitch_lsp
from stitch_lsp.server.app import FEATURE_MODULES
from stitch_lsp.workers import WORKER_ENTRY_POINTS, WORKER_PACKAGES, runs_in_worker

pytestmark = pytest.mark.slow  # starts processes (server, workers, nvcc)

CHECK = """
import importlib, sys
names = sys.argv[1:]
for name in names:
    importlib.import_module(name)
import stitch_lsp.server.app as app
server = app.create_server()
assert not server.load_errors, server.load_errors
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "ncu_report", "numpy"))
print("LOADED", len(names), len(app.FEATURE_MODULES))
assert not bad, bad[:10]
"""


def server_side_modules() -> list[str]:
    names = [
        m.name
        for m in pkgutil.walk_packages(stitch_lsp.__path__, "stitch_lsp.")
        if not runs_in_worker(m.name)
    ]
    return sorted(n for n in names if n != "stitch_lsp.__main__")


def test_every_server_side_module_imports_without_torch() -> None:
    names = server_side_modules()
    assert "stitch_lsp.server.features.profile" in names and len(names) > 60
    out = subprocess.run(
        [sys.executable, "-c", CHECK, *names],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"LOADED {len(names)} {len(FEATURE_MODULES)}" in out.stdout


def test_worker_entry_points_are_worker_side() -> None:
    assert all(runs_in_worker(m) for m in WORKER_ENTRY_POINTS.values())
    assert not runs_in_worker("stitch_lsp.verify.client")


def test_the_worker_side_is_exactly_the_worker_folders() -> None:
    """The rule is about packages: every `worker/` folder is worker side, nothing else is."""
    root = Path(stitch_lsp.__file__).parent
    folders = sorted(
        "stitch_lsp." + ".".join(p.parent.relative_to(root).parts)
        for p in root.rglob("worker/__init__.py")
    )
    assert folders == sorted(WORKER_PACKAGES)
    for module in (m.name for m in pkgutil.walk_packages(stitch_lsp.__path__, "stitch_lsp.")):
        assert runs_in_worker(module) == (".worker." in module + "."), module
