"""The VS Code extension built once per test session, as a fresh checkout would build it.

`installed`: a copy of client-vscode/ without node_modules or build output (so the run neither
depends on nor disturbs the checkout's own), after `npm ci`. `vsix`: its `npm run package`
(bundle, server wheel, .vsix). The extension's tests and the code-server test share them.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.clients.npm_build import CLIENT, NPM, npm


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if NPM is None:
        pytest.skip("npm not found: the VS Code extension cannot be built")
    fresh = tmp_path_factory.mktemp("vscode") / "client-vscode"
    shutil.copytree(CLIENT, fresh, ignore=shutil.ignore_patterns("node_modules", "out", "*.vsix"))
    npm(fresh, "ci", "--no-audit", "--no-fund", timeout=600)
    return fresh


@pytest.fixture(scope="session")
def vsix(installed: Path) -> Path:
    npm(installed, "run", "package", timeout=600)
    return installed / "stitch-lsp.vsix"
