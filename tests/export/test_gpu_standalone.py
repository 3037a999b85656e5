"""On a GPU: the standalone copy builds through load_inline and passes our Verifier."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.gpu
@pytest.mark.slow
def test_standalone_copy_passes_the_verifier(tmp_path: Path) -> None:
    from stitch_lsp.config import Settings
    from stitch_lsp.verify import verify

    ref = tmp_path / "layernorm_gelu.py"
    shutil.copy(REPO / "examples" / "layernorm_gelu.py", ref)
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path / "ext")}
    proc = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "generate", str(ref), "--coder", "builtin",
         "--verify", "compile", "--standalone"],
        capture_output=True, text=True, timeout=900, env=env, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = tmp_path / "layernorm_gelu_stitch.py"
    os.environ["TORCH_EXTENSIONS_DIR"] = env["TORCH_EXTENSIONS_DIR"]
    result = verify(ref, out, Settings(verify_timeout_s=900))
    assert result.status.value == "passed", (result.message, result.log_tail[-2000:])
    assert result.build is not None and result.build.kind == "load_inline", result.build
