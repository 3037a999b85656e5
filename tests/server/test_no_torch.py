"""The server process must never import torch, not even through a feature module."""

from __future__ import annotations

import subprocess
import sys

from stitch_lsp.server.app import FEATURE_MODULES

CHECK = """
import importlib, sys
import stitch_lsp.server.app as app
server = app.create_server()
for name in app.FEATURE_MODULES:
    importlib.import_module(name)
import stitch_lsp.server.jobs, stitch_lsp.server.handlers, stitch_lsp.server.devices
assert not server.load_errors, server.load_errors
bad = sorted(m for m in sys.modules if m == "torch" or m.startswith("torch."))
print("LOADED", len(app.FEATURE_MODULES))
assert not bad, bad
"""


def test_server_and_every_feature_module_import_without_torch() -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHECK], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"LOADED {len(FEATURE_MODULES)}" in out.stdout
