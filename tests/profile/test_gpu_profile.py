"""End-to-end profiles on a real GPU: build, run under ncu, read, map onto the example's lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "kernels"

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _profile(path: Path, *extra: str, timeout: float = 300) -> dict:
    keep = os.environ.get("STITCH_PROFILE_REPORT_DIR")  # the GPU round keeps the reports
    if keep:
        extra = (*extra, "--report-dir", keep)
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        [sys.executable, "-m", "stitch_lsp", "profile", str(path), "--json", *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )
    if keep:
        (Path(keep) / f"{path.stem}.json").write_text(out.stdout + "\n" + out.stderr[-5000:])
    assert out.stdout, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["ok"], (doc.get("error"), out.stderr[-3000:])
    return doc


def _line_of(path: Path, needle: str) -> int:
    for i, line in enumerate(path.read_text().splitlines(), 1):
        if needle in line:
            return i
    raise AssertionError(f"{needle!r} not in {path}")


def test_profile_cu_example_flags_the_uncoalesced_store() -> None:
    path = EXAMPLES / "profile_uncoalesced.cu"
    doc = _profile(path, "--launch-count", "1")
    assert [k["name"] for k in doc["kernels"]] == ["transpose_naive"]
    kernel = doc["kernels"][0]
    assert kernel["line"] == _line_of(path, "__global__ void transpose_naive")
    assert kernel["duration_us"] > 0
    store = _line_of(path, "out[x * rows + y]")
    here = [d for d in doc["diagnostics"] if Path(d["path"]) == path]
    assert any(d["line"] == store and d["source"] == "ncu" for d in here), here
    assert all(d["url"].startswith("https://docs.nvidia.com/nsight-compute/") for d in here)


def test_profile_python_example_maps_into_the_cuda_string() -> None:
    path = EXAMPLES / "profile_inline_transpose.py"
    doc = _profile(path, "--launch-count", "1", timeout=500)
    assert [k["name"] for k in doc["kernels"]] == ["transpose_inline"]
    assert doc["kernels"][0]["line"] == _line_of(path, "__global__ void transpose_inline")
    store = _line_of(path, "out[x * rows + y]")
    lines = {d["line"] for d in doc["diagnostics"] if Path(d["path"]) == path}
    assert store in lines, sorted(lines)
