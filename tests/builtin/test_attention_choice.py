"""CPU: attention sites that may run PyTorch's sdpa run whichever the first call times faster.

`TimedChoice` is driven with a fake clock here (the GPU test in test_attention.py runs it on a
card); the program tests check which candidates offer the vendor path at all: models whose
other work runs in our kernels, never a reference that is projections and attention alone.
"""

from __future__ import annotations

import copy
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from stitch_lsp.runtime.choice import OURS, VENDOR, TimedChoice

from .helpers import generate_for, write_problem


def _choice(ours_ms: float, vendor_ms: float, capturing: bool = False) -> TimedChoice:
    times = {"ours": ours_ms, "vendor": vendor_ms}

    def timer(fn: Any, runs: int) -> float:
        return times[fn()]

    return TimedChoice(timer=timer, capturing=lambda: capturing)


def test_the_vendor_is_kept_only_when_clearly_faster() -> None:
    ran: list[str] = []
    for ours_ms, vendor_ms, want in ((1.0, 0.5, VENDOR), (1.0, 0.95, OURS), (1.0, 2.0, OURS)):
        c = _choice(ours_ms, vendor_ms)
        ran.clear()
        for _ in range(3):
            c.run("attn", lambda: ran.append("ours") or "ours", lambda: ran.append("v") or "vendor")
        assert c.picked == {"attn": want}
        assert c.times_ms["attn"] == {OURS: ours_ms, VENDOR: vendor_ms}
        # Timing ran each once; then every call (the first included) ran the one kept.
        assert ran[2:] == (["v"] if want == VENDOR else ["ours"]) * 3


def test_nothing_is_decided_inside_a_capture() -> None:
    c = _choice(1.0, 0.1, capturing=True)
    ran: list[str] = []
    c.run("attn", lambda: ran.append("ours"), lambda: ran.append("vendor"))
    assert ran == ["ours"] and c.picked == {}


def test_a_vendor_that_fails_leaves_ours() -> None:
    def timer(fn: Any, runs: int) -> float:
        fn()
        return 1.0

    def vendor() -> None:
        raise RuntimeError("No available kernel")

    c = TimedChoice(timer=timer, capturing=lambda: False)
    ran: list[str] = []
    c.run("attn", lambda: ran.append("ours"), vendor)
    assert c.picked == {"attn": OURS} and "No available kernel" in c.notes["attn"]
    assert ran[-1] == "ours"


def test_run_returns_what_the_kept_path_returns() -> None:
    c = _choice(1.0, 0.5)
    assert c.run("attn", lambda: "ours", lambda: "vendor") == "vendor"
    assert _choice(1.0, 0.5, capturing=True).run("a", lambda: "ours", lambda: "v") == "ours"


def test_the_vendor_output_is_kept_where_it_lies_as_the_buffer() -> None:
    import torch

    buf = torch.zeros(2, 5, 3, 4)
    lying = torch.randn(2, 3, 5, 4).transpose(1, 2).contiguous()  # sdpa's (b, s, h, d) storage
    assert TimedChoice.into(buf, lying) is lying and not buf.any()
    strided = torch.randn(2, 3, 5, 4).transpose(1, 2)  # not as the buffer lies: copied in
    got = TimedChoice.into(buf, strided)
    assert got is buf and torch.equal(buf, strided)
    assert TimedChoice.into(buf, lying.double()) is buf  # another dtype is copied (cast) in


def test_a_copied_module_decides_afresh() -> None:
    c = _choice(1.0, 0.5)
    c.run("attn", lambda: "ours", lambda: "vendor")
    assert copy.deepcopy(c).picked == {} and c.picked


_BLOCK = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def get_inputs():
    return [torch.randn(2, 24, 64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_a_transformer_block_offers_the_vendor_per_site(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    cand = generate_for(write_problem(tmp_path, "block", _BLOCK))
    assert cand.handled, cand.reason
    src = cand.source or ""
    assert src.count("choice.run(") == 1
    assert "F.scaled_dot_product_attention(" in src and "TimedChoice()" in src
    assert "whichever the warm-up call times faster" in src
    compile(src, "block_builtin.py", "exec")


def test_projections_and_attention_alone_run_our_kernel(tmp_path: Path) -> None:
    """The reference is heavy work alone: sdpa in the candidate would be the library doing
    the whole problem, so there is no choice to make."""
    pytest.importorskip("torch")
    from .test_attention import CASES

    source, _ = CASES["causal_bf16"]
    cand = generate_for(write_problem(tmp_path, "alone", source))
    assert cand.handled, cand.reason
    assert "choice.run(" not in (cand.source or "")
    assert "scaled_dot_product_attention(" not in (cand.source or "").split('"""', 2)[2]


def _vendor_values(path: Path, name: str) -> list[tuple[str, Any, Any]]:
    """For every attention node of `path`'s graph: (node, what the program's sdpa path writes,
    the graph's own value), the sdpa call evaluated on the CPU on the interpreter's values."""
    import torch
    import torch.nn.functional as F

    from stitch_lsp.compiler.partition import fold_gemm_epilogues, partition
    from stitch_lsp.compiler.program import _attention_choice, _leaf_vars
    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.worker.capture import capture

    from .host_kernels import seeded_problem
    from .interp import run_graph_env

    model, inputs = seeded_problem(path, name)
    graph = capture(path)
    apply_rewrites(graph)
    groups = fold_gemm_epilogues(graph, partition(graph))
    with torch.no_grad():
        env = run_graph_env(graph, model, inputs)
    var = _leaf_vars(graph)
    scope: dict[str, Any] = {"F": F, "torch": torch}
    params = []
    for leaf in graph.leaves.values():
        if var[leaf.vid].startswith("leaves["):
            params.append(env[leaf.vid])
        else:
            scope[var[leaf.vid]] = env[leaf.vid]
    scope["leaves"] = params
    for n in graph.nodes:
        var.setdefault(n.vid, f"t{n.vid}")
        if isinstance(env.get(n.vid), torch.Tensor):
            scope[f"t{n.vid}"] = env[n.vid]
    out = []
    for g in groups:
        if g.kind != "attention":
            continue
        node = g.nodes[0]
        stub = SimpleNamespace(name=f"stitch_attn_{g.gid}")
        lines = _attention_choice(graph, var, g, stub, "None")  # type: ignore[arg-type]
        vendor = lines[-1].strip().removeprefix("lambda: ").removesuffix(")")
        want = env[node.vid]
        scope[f"t{node.vid}"] = torch.zeros_like(want)
        scope["choice"] = TimedChoice
        with torch.no_grad():
            got = eval(vendor, scope)  # the program's own line, on the CPU
        out.append((node.origin, got, want))
    return out


_MASKED = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(64)
        self.qkv = nn.Linear(64, 3 * 64)
        self.kv_heads = 2
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        b, l, _ = x.shape
        keep = torch.arange(l, device=x.device)[None, :] < lengths[:, None]
        q, k, v = self.qkv(self.norm(x)).view(b, l, 3, 4, 16).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None, None, :])
        c = F.scaled_dot_product_attention(q, k[:, :2], v[:, :2], is_causal=True, enable_gqa=True)
        d = F.scaled_dot_product_attention(q, k, v, attn_mask=bias, scale=0.5)
        return (a + c + d).transpose(1, 2).reshape(b, l, -1)


def get_inputs():
    return [torch.randn(2, 40, 64, dtype=torch.bfloat16), torch.tensor([40, 23]),
            torch.randn(1, 4, 40, 40, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize("name", ["block", "masked"])
def test_the_sdpa_path_computes_the_attention_node(tmp_path: Path, name: str) -> None:
    """The program's sdpa line, run on the CPU on the interpreter's values, writes what the
    attention node computes (boolean, additive and causal masks, GQA, a given scale, operands
    read by strides and offsets from a packed projection), within bf16's rounding of P."""
    torch = pytest.importorskip("torch")
    path = write_problem(tmp_path, name, _BLOCK if name == "block" else _MASKED)
    found = _vendor_values(path, name)
    assert len(found) == (1 if name == "block" else 3)
    for origin, got, want in found:
        assert got.shape == want.shape and got.dtype == want.dtype, origin
        torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2, msg=origin)
