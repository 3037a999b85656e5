"""CPU: whole-model op families and the level-3 dev problems (shrunk) are captured faithfully:
the IR, run with eager ops, matches the reference on odd sizes; refusals name the op and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import generate_for, import_path, write_problem
from .problems_l3 import EINOPS, L3, REFUSED, SMALL_LEVEL3, small_level3

torch = pytest.importorskip("torch")


def _outputs(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (tuple, list)) else [value]


def same_as_reference(path: Path, name: str) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    from .interp import run_graph

    graph = capture(path)
    mod = import_path(path, f"l3_{name}")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(0)
    twin = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        want = _outputs(model(*[t.clone() for t in inputs]))
        got = run_graph(graph, twin, [t.clone() for t in inputs])
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape
        if w.dtype == torch.int64:
            assert torch.equal(g, w)
        else:
            assert torch.allclose(g, w, atol=1e-4, rtol=1e-4), (g - w).abs().max()


@pytest.mark.parametrize("name", sorted(L3))
def test_op_family_is_captured_faithfully(tmp_path: Path, name: str) -> None:
    same_as_reference(write_problem(tmp_path, name, L3[name]), name)


@pytest.mark.parametrize("name", sorted(EINOPS))
def test_einops_goes_through_aten(tmp_path: Path, name: str) -> None:
    pytest.importorskip("einops")
    same_as_reference(write_problem(tmp_path, name, EINOPS[name]), name)


@pytest.mark.parametrize("name", sorted(SMALL_LEVEL3))
def test_level3_dev_problem_shrunk(tmp_path: Path, kernelbench_dir: Path, name: str) -> None:
    if "Mamba" in name:
        pytest.importorskip("einops")
    same_as_reference(
        write_problem(tmp_path, "s" + name, small_level3(kernelbench_dir, name)), name
    )


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refusal_names_op_and_line(tmp_path: Path, name: str) -> None:
    source, word = REFUSED[name]
    cand = generate_for(write_problem(tmp_path, name, source))
    assert not cand.handled
    assert word.lower() in cand.reason.lower(), cand.reason
    assert "(line " in cand.reason, cand.reason


def test_fx_path_keeps_module_names(tmp_path: Path) -> None:
    """Python over shapes (B, T, C = x.size(), a buffer sliced with [:T]) traces with fx."""
    cand = generate_for(write_problem(tmp_path, "attn", L3["causal_softmax_by_hand"]))
    assert cand.handled, cand.reason
    ops = [op for g in cand.groups for op in g.ops]
    assert any(op.startswith("self.qkv") for op in ops), ops
    assert any(op.startswith("softmax") for op in ops), ops


def test_aten_path_names_lines(tmp_path: Path) -> None:
    pytest.importorskip("einops")
    cand = generate_for(write_problem(tmp_path, "ein", EINOPS["einops_rearrange"]))
    assert cand.handled, cand.reason
    line = EINOPS["einops_rearrange"].splitlines().index("        y = torch.cumsum(y, dim=-1)")
    scans = [g for g in cand.groups if g.kind == "scan"]
    assert scans and scans[0].lines == [line + 1], scans
