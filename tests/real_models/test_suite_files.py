"""The real-model suite's problem files run as the Verifier runs them, on a CPU, small size.

Each file of benchmarks/real_models/ and the decode step of tests/data/stitch_problems/ is
imported by path (as the Verifier and the builtin coder import a reference), built from
`get_init_inputs()` and run forward on `get_inputs()`, in fp32 and bf16: the suite is what the
compiler is measured on, so a file that no longer builds (a library update, a typo) must show
here rather than as a refusal on the GPU machine. Also: the benchmark's timing mode says plainly
that it needs a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
SUITE = REPO / "benchmarks" / "real_models"
DECODE = REPO / "tests" / "data" / "stitch_problems" / "level3" / "1_LlamaDecodeStep.py"
FILES = [*sorted(p for p in SUITE.glob("*.py") if not p.name.startswith("_")), DECODE]
MISSING = [
    n
    for n in ("torch", "torchvision", "timm", "transformers")
    if importlib.util.find_spec(n) is None
]
needs_models = pytest.mark.skipif(
    bool(MISSING),
    reason=f"the models extra is not installed ({', '.join(MISSING)} missing): "
    "pip install -e '.[torch,models]'",
)


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"real_model_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_suite_has_its_models() -> None:
    assert len(FILES) >= 23, [p.name for p in FILES]
    prefixes = {p.stem.split("_")[0] for p in FILES}
    assert {"tv", "timm", "hf"} <= prefixes


@needs_models
@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_small_forward_on_cpu(path: Path, dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    monkeypatch.setenv("STITCH_MODEL_SIZE", "small")
    monkeypatch.setenv("STITCH_MODEL_DTYPE", dtype)
    module = _import(path)
    init = module.get_init_inputs()
    assert init == ["small", dtype]
    torch.manual_seed(42)
    model = module.Model(*init)
    assert not model.training
    inputs = module.get_inputs()
    for x in inputs:
        assert x.dtype in (getattr(torch, dtype), torch.long), (x.dtype, dtype)
    with torch.no_grad():
        out = model(*inputs)
    assert isinstance(out, torch.Tensor)
    assert out.dtype == getattr(torch, dtype)
    assert torch.isfinite(out.float()).all()


@pytest.mark.parametrize("path", [SUITE / "tv_resnet18.py", DECODE], ids=["suite", "decode"])
def test_a_bad_case_is_named(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("STITCH_MODEL_DTYPE", "float8")
    with pytest.raises(ValueError, match="STITCH_MODEL_DTYPE='float8'"):
        _import(path).get_init_inputs()
    monkeypatch.setenv("STITCH_MODEL_DTYPE", "bf16")
    monkeypatch.setenv("STITCH_MODEL_SIZE", "huge")
    with pytest.raises(ValueError, match="STITCH_MODEL_SIZE='huge'"):
        _import(path).get_init_inputs()


@needs_models
def test_timing_without_a_gpu_says_so_and_fails(tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "real_models.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "No CUDA GPU visible: timing needs one" in out.stderr
    assert not list(tmp_path.iterdir())
