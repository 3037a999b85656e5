"""Builds, tests and packages the VS Code extension the way a fresh checkout would.

`npm ci && npm test && npm run package` in a copy of client-vscode/ without node_modules or
build output (so the run neither depends on nor disturbs the checkout's own): npm test runs the
client's unit tests and the end-to-end tests against this interpreter's server (STITCH_PYTHON).
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.clients.npm_build import NPM, REPO, npm

pytestmark = [
    pytest.mark.skipif(NPM is None, reason="npm not found: the VS Code extension cannot be built"),
    pytest.mark.slow,
]


def test_npm_test(installed: Path) -> None:
    proc = npm(installed, "test", timeout=300)
    # node's test runner prints a summary; make sure tests really ran and none were skipped.
    assert "ℹ fail 0" in proc.stdout, proc.stdout[-3000:]
    assert "ℹ skipped 0" in proc.stdout, proc.stdout[-3000:]


def test_npm_run_package_writes_a_vsix(vsix: Path) -> None:
    assert vsix.is_file()
    with zipfile.ZipFile(vsix) as zf:
        names = set(zf.namelist())
        wheels = [n for n in names if n.startswith("extension/out/bundled/stitch_lsp-")]
        assert len(wheels) == 1, names
        with zf.open(wheels[0]) as fh, zipfile.ZipFile(io.BytesIO(fh.read())) as wheel:
            wheel_names = set(wheel.namelist())
    assert {
        "extension/package.json",
        "extension/out/extension.js",
        "extension/LICENSE.txt",  # vsce's names for LICENSE and CHANGELOG.md
        "extension/changelog.md",
        "extension/images/icon.png",
        "extension.vsixmanifest",
    } <= names
    # The server's wheel carries the licence and everything `serve` needs.
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in wheel_names), wheel_names
    assert "stitch_lsp/server/features/results.py" in wheel_names
    assert not any(n.startswith("extension/node_modules/") for n in names), (
        "node_modules leaked into the .vsix"
    )
    assert not any(n.startswith("extension/src/") for n in names), "sources leaked into the .vsix"


def test_the_packaged_bundle_activates_and_serves(
    installed: Path, vsix: Path, tmp_path: Path
) -> None:
    """The minified bundle inside the .vsix, not the test build, against the real server."""
    with zipfile.ZipFile(vsix) as zf:
        zf.extract("extension/out/extension.js", tmp_path)
    bundle = tmp_path / "extension" / "out" / "extension.js"
    tests = ["out/test/unit/activation.test.js", "out/test/e2e/extension.test.js"]
    if not all((installed / t).is_file() for t in tests):
        npm(installed, "run", "compile-tests", timeout=300)  # npm test has not run before this
    env = {
        **os.environ,
        "STITCH_BUNDLE": str(bundle),
        "STITCH_PYTHON": sys.executable,
        "STITCH_REPO_ROOT": str(REPO),
    }
    proc = subprocess.run(
        ["node", "--test", "--test-reporter=spec", *tests],
        cwd=installed,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-3000:]
    assert "ℹ fail 0" in proc.stdout, proc.stdout[-3000:]
