"""Running npm on a copy of the VS Code extension (shared by tests/clients' tests and fixtures)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CLIENT = REPO / "client-vscode"
NPM = shutil.which("npm")


def npm(cwd: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "STITCH_PYTHON": sys.executable,
        # `npm run package` builds the server's wheel from this checkout (the copy has no `..`).
        "STITCH_PROJECT_DIR": str(REPO),
        "STITCH_REPO_ROOT": str(REPO),  # the tests' fixtures (an ncu report) live there
        "CI": "1",
    }
    assert NPM is not None
    proc = subprocess.run(
        [NPM, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = f"{proc.stdout[-6000:]}\n{proc.stderr[-6000:]}"
    assert proc.returncode == 0, f"npm {' '.join(args)} failed ({proc.returncode}):\n{output}"
    return proc
