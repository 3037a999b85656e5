"""CPU: reductions over size-1 dims only are elementwise ops, captured and generated.

timm's MobileViT and a Linear with one output feature reduce over such dims (`(1,) of (2048, 1)`,
`(3,) of (8, 4, 1, 1)`); there is no reduction layout for them, so the builder writes each as
the one element it reduces: sum/mean/max/min the element, var 0, softmax 1, log_softmax 0,
logsumexp the element, argmax 0 (int64). The interpreter checks each against torch, infinities
and NaN included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import generate_for, import_path, write_problem
from .problems_l3 import model

torch = pytest.importorskip("torch")

SPECIAL = "torch.tensor([[1.5], [-2.0], [float('inf')], [-float('inf')], [float('nan')], [0.0]])"

CASES: dict[str, tuple[str, str, str]] = {
    # name: (init, forward, inputs)
    "linear_softmax": (
        "self.fc = nn.Linear(9, 1)",
        "return torch.softmax(self.fc(x), dim=1)",
        "torch.randn(13, 9)",
    ),
    "log_softmax_4d": ("", "return F.log_softmax(x, dim=3)", "torch.randn(8, 4, 1, 1)"),
    "logsumexp": ("", "return torch.logsumexp(x, dim=1) * 2.0", "torch.randn(11, 1)"),
    "var_std": (
        "",
        "return torch.var(x, dim=2, unbiased=False) + x.std(dim=-1, correction=0) + x[..., 0]",
        "torch.randn(5, 3, 1)",
    ),
    "layer_norm_of_one": ("self.n = nn.LayerNorm(1)", "return self.n(x)", "torch.randn(6, 1)"),
    "extrema_sums": (
        "",
        "return x.amax(dim=(1, 3)) + x.mean(dim=(1, 3)), "
        "x.amin(dim=3, keepdim=True) + x.sum(dim=1, keepdim=True)",
        "torch.randn(4, 1, 3, 1)",
    ),
    "argmax": (
        "",
        "return torch.argmax(x, dim=1), torch.argmin(x, dim=1, keepdim=True)",
        "torch.randn(7, 1)",
    ),
    "max_pair": ("", "v, i = torch.max(x, dim=-1)\nreturn v * 2.0, i", "torch.randn(7, 1)"),
    "softmax_special": ("", "return torch.softmax(x, dim=1) + F.log_softmax(x, 1)", SPECIAL),
    "logsumexp_special": ("", "return torch.logsumexp(x, 1, keepdim=True) - x", SPECIAL),
    "var_special": ("", "return torch.var(x, 1, correction=0)", SPECIAL),
}


def _source(name: str) -> str:
    init, forward, inputs = CASES[name]
    return model(init, forward, inputs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_size_one_reduction_matches_torch(tmp_path: Path, name: str) -> None:
    from stitch_lsp.compiler.worker.capture import capture

    from .interp import run_graph

    path = write_problem(tmp_path, name, _source(name))
    graph = capture(path)
    assert not [n for n in graph.nodes if n.kind == "reduce"], graph.summary()
    mod = import_path(path, f"one_{name}")
    torch.manual_seed(0)
    ref = mod.Model(*mod.get_init_inputs())
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        want = ref(*inputs)
        got = run_graph(graph, ref, inputs)
    want = list(want) if isinstance(want, tuple) else [want]
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype)
        if w.dtype == torch.int64:
            assert torch.equal(g, w)
        else:
            assert torch.allclose(g, w, atol=1e-6, rtol=1e-6, equal_nan=True), (g, w)


@pytest.mark.parametrize("name", ["linear_softmax", "log_softmax_4d", "argmax", "var_std"])
def test_size_one_reduction_is_generated(tmp_path: Path, name: str) -> None:
    """The refusal `reduction over size-1 dims (1,) of (2048, 1)` is gone: a candidate comes out,
    its kernels elementwise."""
    cand = generate_for(write_problem(tmp_path, name, _source(name)))
    assert cand.handled, cand.reason
    assert all(g.kind in ("pointwise", "gemm") for g in cand.groups), cand.groups
