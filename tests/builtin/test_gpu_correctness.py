"""On a GPU: generated candidates match the eager reference (atol=rtol=1e-4, as KernelBench)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import generate_for, import_path, write_problem
from .problems import PROBLEMS

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


def _check(tmp_path: Path, name: str, source: str, trials: int = 3) -> None:
    torch = pytest.importorskip("torch")
    ref_path = write_problem(tmp_path, name, source)
    cand = generate_for(ref_path)
    assert cand.handled, cand.reason
    cand_path = tmp_path / f"{name}_builtin.py"
    cand_path.write_text(cand.source or "")
    ref = import_path(ref_path, f"ref_{name}")
    new = import_path(cand_path, f"new_{name}")
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
            want = model(*[t.clone() for t in inputs])
            got = model_new(*[t.clone() for t in inputs])
        torch.cuda.synchronize()
        assert got.shape == want.shape
        diff = (got - want).abs().max().item()
        assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), f"{name}: max abs diff {diff}"
    # Training-mode batch norm also updates running statistics, like the reference.
    for (n_ref, b_ref), (n_new, b_new) in zip(
        model.named_buffers(), model_new.named_buffers(), strict=True
    ):
        assert n_ref == n_new
        assert torch.allclose(b_ref.float(), b_new.float(), atol=1e-4, rtol=1e-4), n_ref


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_matches_reference(tmp_path: Path, name: str) -> None:
    _check(tmp_path, name, PROBLEMS[name])


LEVEL2_SAMPLE = ["76_Gemm_Add_ReLU", "99_Matmul_GELU_Softmax", "24_Conv3d_Min_Softmax"]


@pytest.mark.parametrize("stem", LEVEL2_SAMPLE)
def test_level2_full_size(tmp_path: Path, kernelbench_dir: Path, stem: str) -> None:
    source = (kernelbench_dir / "level2" / f"{stem}.py").read_text()
    _check(tmp_path, "p" + stem, source, trials=2)
