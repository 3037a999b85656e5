"""On a GPU: candidates for the whole-model op families and the shrunk level-3 dev problems
match the eager reference (atol = rtol = 1e-4, fp32, TF32 off), on odd sizes and fresh inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import generate_for, import_path, write_problem
from .problems_l3 import EINOPS, L3, SMALL_LEVEL3, small_level3

pytestmark = pytest.mark.gpu


def _outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def check_on_gpu(tmp_path: Path, name: str, source: str, trials: int = 3) -> None:
    torch = pytest.importorskip("torch")
    ref_path = write_problem(tmp_path, name, source)
    cand = generate_for(ref_path)
    assert cand.handled, cand.reason
    cand_path = tmp_path / f"{name}_builtin.py"
    cand_path.write_text(cand.source or "")
    ref = import_path(ref_path, f"gref_{name}")
    new = import_path(cand_path, f"gnew_{name}")
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(42)
    model = ref.Model(*ref.get_init_inputs()).to(dev)
    torch.manual_seed(42)
    model_new = new.ModelNew(*ref.get_init_inputs()).to(dev)
    for trial in range(trials):
        torch.manual_seed(trial)
        inputs = [t.to(dev) for t in ref.get_inputs()]
        with torch.no_grad():
            want = _outputs(model(*[t.clone() for t in inputs]))
            got = _outputs(model_new(*[t.clone() for t in inputs]))
        torch.cuda.synchronize()
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype)
            if w.dtype == torch.int64:
                assert torch.equal(g, w), name
                continue
            diff = (g - w).abs().max().item()
            assert torch.allclose(g, w, atol=1e-4, rtol=1e-4), f"{name}: max abs diff {diff}"
    for (n_ref, b_ref), (n_new, b_new) in zip(
        model.named_buffers(), model_new.named_buffers(), strict=True
    ):
        assert n_ref == n_new
        assert torch.allclose(b_ref.float(), b_new.float(), atol=1e-4, rtol=1e-4), n_ref


@pytest.mark.parametrize("name", sorted(L3))
def test_op_family_on_gpu(tmp_path: Path, name: str) -> None:
    check_on_gpu(tmp_path, name, L3[name])


@pytest.mark.parametrize("name", sorted(EINOPS))
def test_einops_on_gpu(tmp_path: Path, name: str) -> None:
    pytest.importorskip("einops")
    check_on_gpu(tmp_path, name, EINOPS[name])


@pytest.mark.parametrize("name", sorted(SMALL_LEVEL3))
def test_level3_shrunk_on_gpu(tmp_path: Path, kernelbench_dir: Path, name: str) -> None:
    if "Mamba" in name:
        pytest.importorskip("einops")
    check_on_gpu(tmp_path, "s" + name, small_level3(kernelbench_dir, name), trials=2)
