"""CPU: attention sites that may run PyTorch's sdpa run whichever the first call times faster.

`TimedChoice` is driven with a fake clock here (the GPU test in test_attention.py runs it on a
card); the program tests check which candidates offer the vendor path at all: models whose
other work runs in our kernels, never a reference that is projections and attention alone.
"""

from __future__ import annotations

import copy
from pathlib import Path
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
