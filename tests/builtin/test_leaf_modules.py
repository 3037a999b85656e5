"""The hook for modules captured whole: one call of the catalog entry's capture function in
the fx and the ATen paths alike, with the module's parameters as leaves named by path."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitch_lsp.compiler import catalog

from . import leaf_example
from .helpers import import_path, write_problem

torch = pytest.importorskip("torch")

MODULE = """import torch
import torch.nn as nn
from {example} import ScaleShift

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = nn.Sequential(ScaleShift(7))
        self.fc = nn.Linear(7, 5)

    def forward(self, x):
{body}

def get_inputs():
    return [torch.randn(3, 7)]

def get_init_inputs():
    return []
"""
FX_BODY = "        y, s = self.inner[0](x)\n        return self.fc(torch.relu(y)) + s.sum()"
# einsum is captured at the ATen level only, so this problem takes the ATen path.
ATEN_BODY = (
    "        y, s = self.inner[0](x)\n        y = torch.einsum('ij->ij', y)\n"
    "        return self.fc(torch.relu(y)) + s.sum()"
)


@pytest.fixture
def scale_shift_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    name = leaf_example.__name__  # as pytest imported it
    rule = catalog.LeafModule(
        modules=(f"{name}.ScaleShift",),
        capture=f"{name}:capture_scale_shift",
        outputs=f"{name}:scale_shift_outputs",
    )
    monkeypatch.setattr(catalog, "LEAF_MODULES", [rule])
    leaf_example.CALLS.clear()


@pytest.mark.parametrize("body", [FX_BODY, ATEN_BODY], ids=["fx", "aten"])
def test_leaf_module_is_one_call(tmp_path: Path, body: str, scale_shift_rule: None) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    from .interp import run_graph

    path = write_problem(
        tmp_path, "leaf_problem", MODULE.format(body=body, example=leaf_example.__name__)
    )
    graph = capture(path)
    # The ATen path runs after fx gave up at the einsum: one call from each.
    assert len(leaf_example.CALLS) == (1 if body == FX_BODY else 2), leaf_example.CALLS
    call = leaf_example.CALLS[-1]
    assert call["path"] == "inner.0" and call["expr"] == "self.inner[0]"
    assert call["shapes"] == ((3, 7), (3, 7))
    assert call["line"] == 12
    assert "self.inner[0].weight" in {leaf.expr for leaf in graph.leaves.values()}
    mod = import_path(path, "leaf_problem_ref")
    torch.manual_seed(0)
    model = mod.Model()
    x = torch.randn(3, 7)
    with torch.no_grad():
        want = model(x)
        (got,) = run_graph(graph, model, [x])
    assert torch.allclose(got, want, atol=1e-5)


def test_without_rule_the_module_is_traced_into(tmp_path: Path) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    leaf_example.CALLS.clear()
    graph = capture(
        write_problem(
            tmp_path, "leaf_problem", MODULE.format(body=FX_BODY, example=leaf_example.__name__)
        )
    )
    assert not leaf_example.CALLS
    assert [n.fn for n in graph.nodes if n.kind == "ew"][:2] == ["mul", "add"]
