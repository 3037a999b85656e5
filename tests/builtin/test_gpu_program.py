"""On a GPU: recurrent modules and whole programs match PyTorch (atol=rtol=1e-4), under CUDA graph
replay with fresh inputs on every call, and with plain launches (STITCH_CUDA_GRAPH=0)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import generate_for, import_path, write_problem
from .rnn_problems import CASES, RnnCase
from .test_program import BN_PROBLEM

pytestmark = [pytest.mark.gpu, pytest.mark.slow]


LEVEL3 = ["35_LSTM", "39_GRU", "8_ResNetBasicBlock"]


@pytest.fixture(scope="module", autouse=True)
def _prebuild(tmp_path_factory: pytest.TempPathFactory, kernelbench_dir: Path) -> None:
    """Build every candidate of this module in parallel first (nvcc caches by content)."""
    from tests.conftest import gpu_reason

    if gpu_reason() is not None:
        return
    from .conftest import _prebuild_sources

    folder = tmp_path_factory.mktemp("prebuild_program")
    sources = {case.name: case.source() for case in CASES}
    sources["bn_replay"] = BN_PROBLEM
    for stem in LEVEL3:
        sources["p" + stem] = (kernelbench_dir / "level3" / f"{stem}.py").read_text()
    _prebuild_sources(folder, sources)


def _flat(out: Any) -> list[Any]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _pair(tmp_path: Path, name: str, source: str) -> tuple[Any, Any, Any]:
    torch = pytest.importorskip("torch")
    ref_path = write_problem(tmp_path, name, source)
    cand = generate_for(ref_path)
    assert cand.handled, cand.reason
    cand_path = tmp_path / f"{name}_builtin.py"
    cand_path.write_text(cand.source or "")
    ref = import_path(ref_path, f"ref_{name}")
    new = import_path(cand_path, f"new_{name}")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    torch.manual_seed(42)
    model = ref.Model(*ref.get_init_inputs()).to(dev)
    torch.manual_seed(42)
    model_new = new.ModelNew(*ref.get_init_inputs()).to(dev)
    return ref, model, model_new


def _run(ref: Any, model: Any, model_new: Any, calls: int, name: str) -> list[Any]:
    """Call both models `calls` times on fresh inputs; the same seed before each call, so
    random numbers drawn inside forward (an LSTM's h0) are the same draws for both."""
    torch = pytest.importorskip("torch")
    dev = torch.device("cuda")
    kept = []
    for call in range(calls):
        torch.manual_seed(100 + call)
        inputs = [t.to(dev) for t in ref.get_inputs()]
        with torch.no_grad():
            torch.manual_seed(7 + call)
            want = _flat(model(*[t.clone() for t in inputs]))
            torch.manual_seed(7 + call)
            got = _flat(model_new(*[t.clone() for t in inputs]))
        torch.cuda.synchronize()
        assert len(got) == len(want)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            assert g.shape == w.shape, (name, k)
            diff = (g - w).abs().max().item()
            assert torch.allclose(g, w, atol=1e-4, rtol=1e-4), f"{name} call {call} out {k}: {diff}"
        kept.append((got, [w.clone() for w in want]))
    # Nothing a later call did overwrote what an earlier call returned.
    for got, want in kept:
        for g, w in zip(got, want, strict=True):
            assert torch.allclose(g, w, atol=1e-4, rtol=1e-4)
    return kept


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_recurrent_matches_pytorch(tmp_path: Path, case: RnnCase) -> None:
    ref, model, model_new = _pair(tmp_path, case.name, case.source())
    _run(ref, model, model_new, calls=4, name=case.name)
    runner = model_new._stitch_runner
    assert runner.mode == "replay", runner.reason


def test_recurrent_plain_launches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STITCH_CUDA_GRAPH", "0")
    case = RnnCase("GRU", layers=2, bidirectional=True, batch_first=True)
    ref, model, model_new = _pair(tmp_path, case.name, case.source())
    _run(ref, model, model_new, calls=3, name=case.name)
    runner = model_new._stitch_runner
    assert runner.mode == "plain" and "STITCH_CUDA_GRAPH" in runner.reason


def test_replay_fresh_outputs_and_batch_norm_statistics(tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    ref, model, model_new = _pair(tmp_path, "bn_replay", BN_PROBLEM)
    kept = _run(ref, model, model_new, calls=5, name="bn_replay")
    assert model_new._stitch_runner.mode == "replay"
    assert model_new._stitch_runner.captures == 1
    # Outputs follow the inputs (different every call) and live in different memory.
    outs = [got[0] for got, _ in kept]
    assert not torch.allclose(outs[-1], outs[-2])
    assert len({o.data_ptr() for o in outs}) == len(outs)
    # Running statistics after warm-up, capture and three replays: as the reference's.
    for (n_ref, b_ref), (n_new, b_new) in zip(
        model.named_buffers(), model_new.named_buffers(), strict=True
    ):
        assert n_ref == n_new
        assert torch.allclose(b_ref.float(), b_new.float(), atol=1e-5, rtol=1e-5), n_ref
    assert int(model_new.bn.num_batches_tracked) == 5
    assert int(model_new.bn2.num_batches_tracked) == 5


def test_moving_the_module_captures_again(tmp_path: Path) -> None:
    case = RnnCase("LSTM", layers=1, returns="seq")
    ref, model, model_new = _pair(tmp_path, case.name, case.source())
    _run(ref, model, model_new, calls=3, name=case.name)
    old = model_new._stitch_runner
    model_new.cpu().cuda()  # new parameter storage: the old graph would read freed memory
    _run(ref, model, model_new, calls=3, name=case.name)
    new = model_new._stitch_runner
    assert new is not old and new.mode == "replay" and new.captures == 1


@pytest.mark.parametrize("stem", LEVEL3)
def test_level3_end_to_end(tmp_path: Path, kernelbench_dir: Path, stem: str) -> None:
    source = (kernelbench_dir / "level3" / f"{stem}.py").read_text()
    ref, model, model_new = _pair(tmp_path, "p" + stem, source)
    _run(ref, model, model_new, calls=3, name=stem)
    assert model_new._stitch_runner.mode == "replay", model_new._stitch_runner.reason
