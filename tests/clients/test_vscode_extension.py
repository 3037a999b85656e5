"""Builds, tests and packages the VS Code extension the way a fresh checkout would.

`npm ci && npm test && npm run package` in client-vscode/: npm test runs the client's unit tests
and the protocol end-to-end test against this interpreter's server (STITCH_PYTHON).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

CLIENT = Path(__file__).resolve().parents[2] / "client-vscode"
NPM = shutil.which("npm")

pytestmark = [
    pytest.mark.skipif(NPM is None, reason="npm not found: the VS Code extension cannot be built"),
    pytest.mark.slow,
]


def npm(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "STITCH_PYTHON": sys.executable, "CI": "1"}
    proc = subprocess.run(
        [NPM, *args],
        cwd=CLIENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, f"npm {' '.join(args)} failed ({proc.returncode}):\n{output}"
    return proc


@pytest.fixture(scope="module")
def installed() -> None:
    npm("ci", "--no-audit", "--no-fund", timeout=600)


def test_npm_test(installed: None) -> None:
    proc = npm("test", timeout=300)
    # node's test runner prints a summary; make sure tests really ran and none were skipped.
    assert "# fail 0" in proc.stdout or "ℹ fail 0" in proc.stdout, proc.stdout[-3000:]
    assert "ℹ skipped 0" in proc.stdout or "# skip 0" in proc.stdout, proc.stdout[-3000:]


def test_npm_run_package_writes_a_vsix(installed: None) -> None:
    vsix = CLIENT / "stitch-lsp.vsix"
    vsix.unlink(missing_ok=True)
    npm("run", "package", timeout=300)
    assert vsix.is_file()
    with zipfile.ZipFile(vsix) as zf:
        names = set(zf.namelist())
    assert {
        "extension/package.json",
        "extension/out/extension.js",
        "extension.vsixmanifest",
    } <= names
    assert not any(n.startswith("extension/node_modules/") for n in names), (
        "node_modules leaked into the .vsix"
    )
    assert not any(n.startswith("extension/src/") for n in names), "sources leaked into the .vsix"
