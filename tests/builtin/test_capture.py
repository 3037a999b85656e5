"""CPU: the captured graph, run with eager ops, reproduces the reference (capture is faithful)."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import import_path, write_problem
from .problems import PROBLEMS

torch = pytest.importorskip("torch")


def _same(ref_path: Path, name: str) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    from .interp import run_graph

    graph = capture(ref_path)
    mod = import_path(ref_path, f"cap_{name}")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(0)
    twin = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        want = model(*[t.clone() for t in inputs])
        (got,) = run_graph(graph, twin, [t.clone() for t in inputs])
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-4, rtol=1e-4), (got - want).abs().max()
    for (n1, b1), (_, b2) in zip(model.named_buffers(), twin.named_buffers(), strict=True):
        assert torch.allclose(b1.float(), b2.float(), atol=1e-5), n1


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_capture_is_faithful(tmp_path: Path, name: str) -> None:
    _same(write_problem(tmp_path, name, PROBLEMS[name]), name)


def test_input_shapes_come_from_get_inputs(tmp_path: Path) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    graph = capture(write_problem(tmp_path, "p", PROBLEMS["linear_odd_tail"]))
    (x,) = [leaf for leaf in graph.leaves.values() if leaf.kind == "input"]
    assert x.shape == (7, 33)
    assert graph.input_names == ["x"]
