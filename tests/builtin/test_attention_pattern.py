"""Attention written out by hand (matmul, scale, additive terms, softmax, matmul) becomes the flash
kernel's attention node in bf16/fp16 (stitch_lsp/compiler/attention_pattern.py).

CPU: the rewrite fires on torchvision Swin's window attention (a relative position bias, and
in shifted blocks a mask that repeats every `windows` batches), minGPT's masked_fill causal
attention and T5's unscaled attention with a position bias and an fp32 softmax; it leaves the
chain alone where the scores are seen elsewhere or scaled after a term; the rewritten graph
computes the model; the program's sdpa line computes the same node; the flash launches agree
with the graph in host emulation. GPU: the generated program matches the model, with each
attention path forced in turn.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .helpers import fresh_candidate, import_path, on_gpu, write_problem
from .interp import run_graph

torch = pytest.importorskip("torch")

_WINDOWS = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim: int, heads: int, window: int, shift: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.heads, self.window, self.shift = heads, window, shift
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.5)
        grid = torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")
        coords = torch.stack(grid).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("index", (rel[:, :, 0] * (2 * window - 1) + rel[:, :, 1]).flatten())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, h, w, c = x.shape
        win, s = self.window, self.shift
        n = win * win
        y = self.norm(x)
        if s:
            y = torch.roll(y, (-s, -s), (1, 2))
        windows = (h // win) * (w // win)
        y = y.view(b, h // win, win, w // win, win, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, n, c)
        qkv = self.qkv(y).reshape(-1, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * (c // self.heads) ** -0.5
        attn = q.matmul(k.transpose(-2, -1))
        bias = self.table[self.index].view(n, n, -1).permute(2, 0, 1).contiguous().unsqueeze(0)
        attn = attn + bias
        if s:
            region = torch.zeros(h, w, device=x.device, dtype=x.dtype)
            cuts = ((0, -win), (-win, -s), (-s, None))
            count = 0
            for hs in cuts:
                for ws in cuts:
                    region[hs[0] : hs[1], ws[0] : ws[1]] = count
                    count += 1
            region = region.view(h // win, win, w // win, win).permute(0, 2, 1, 3).reshape(-1, n)
            mask = region.unsqueeze(1) - region.unsqueeze(2)
            mask = mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0)
            attn = attn.view(b, windows, self.heads, n, n) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.heads, n, n)
        attn = F.softmax(attn, dim=-1)
        o = attn.matmul(v).transpose(1, 2).reshape(-1, n, c)
        o = self.proj(o).view(b, h // win, w // win, win, win, c)
        o = o.permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        if s:
            o = torch.roll(o, (s, s), (1, 2))
        return x + o


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(64, 2, 4, 0), Block(64, 2, 4, 2))
        self.to(torch.{dtype})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def get_inputs():
    return [torch.randn(3, 8, 8, 64, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""

_MINGPT = """
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(64)
        self.attn = nn.Linear(64, 192)
        self.proj = nn.Linear(64, 64)
        self.register_buffer("bias", torch.tril(torch.ones(48, 48)).view(1, 1, 48, 48))
        self.to(torch.{dtype})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.size()
        q, k, v = self.attn(self.ln(x)).split(64, dim=2)
        q, k, v = (z.view(b, t, 4, 16).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return x + self.proj(y)


def get_inputs():
    return [torch.randn(2, 40, 64, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""

_T5 = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(64, 64, bias=False) for _ in range(4))
        self.position_bias = nn.Parameter(torch.randn(1, 2, 24, 24))
        self.to(torch.{dtype})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, l, _ = x.shape
        q, k, v = (f(x).view(b, l, 2, 32).transpose(1, 2) for f in (self.q, self.k, self.v))
        scores = torch.matmul(q, k.transpose(3, 2))
        scores = (scores + self.position_bias){returned}
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        out = torch.matmul(weights, v).transpose(1, 2).reshape(b, l, 64)
        return {result}


def get_inputs():
    return [torch.randn(2, 24, 64, dtype=torch.{dtype})]


def get_init_inputs():
    return []
"""


def _source(name: str, dtype: str) -> str:
    kind, _, variant = name.partition(":")
    if kind == "windows":
        return _WINDOWS.replace("{dtype}", dtype)
    if kind == "mingpt":
        return _MINGPT.replace("{dtype}", dtype)
    returned = {"": ("", "x + self.o(out)"), "weights_returned": ("", "x + self.o(out), weights")}
    returned["scaled_after_bias"] = (" * 0.5", "x + self.o(out)")
    extra, result = returned[variant]
    return _T5.replace("{dtype}", dtype).replace("{returned}", extra).replace("{result}", result)


# name -> attention nodes after the rewrite in bf16 (0: the chain is left as it is)
CASES = {
    "windows": 2,
    "mingpt": 1,
    "t5": 1,
    "t5:weights_returned": 0,  # the softmax is an output too
    "t5:scaled_after_bias": 0,  # (s + m) c: the term would need the scale
}


def _graph(path: Path) -> tuple[Any, list[Any]]:
    from stitch_lsp.compiler.rewrites import apply_rewrites
    from stitch_lsp.compiler.worker.capture import capture

    graph = capture(path)
    return graph, apply_rewrites(graph)


def _run(path: Path, graph: Any, tag: str) -> tuple[list[Any], list[Any]]:
    mod = import_path(path, tag)
    torch.manual_seed(0)
    model = mod.Model().eval()
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        want = model(*inputs)
        got = run_graph(graph, model, inputs)
    want = list(want) if isinstance(want, tuple) else [want]
    return list(got), want


@pytest.mark.parametrize("name", sorted(CASES))
def test_written_out_attention_becomes_one_node(tmp_path: Path, name: str) -> None:
    path = write_problem(tmp_path, name.replace(":", "_"), _source(name, "bfloat16"))
    graph, applied = _graph(path)
    attn = [n for n in graph.nodes if n.kind == "attn"]
    assert len(attn) == CASES[name], graph.summary()
    assert sum(a.name == "written_out_attention" for a in applied) == CASES[name]
    if CASES[name]:
        assert not any(n.kind == "reduce" and n.fn == "softmax" for n in graph.nodes)
        assert not any(n.kind == "gemm" and n.params.get("batch", 1) > 1 for n in graph.nodes)
        assert all(n.params["mask"] == "add" for n in attn)
    if name == "windows":  # 3 images of 4 windows, 2 heads: the shift mask repeats every 4
        assert attn[1].shape == (12, 16, 2, 32) and attn[1].uses[3].shape == (4, 2, 16, 16)
    got, want = _run(path, graph, f"pattern_{name.replace(':', '_')}")
    for g, w in zip(got, want, strict=True):
        torch.testing.assert_close(g.float(), w.float(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("name", ["windows", "mingpt", "t5"])
def test_float32_attention_keeps_its_gemms(tmp_path: Path, name: str) -> None:
    """The flash kernel is bf16/fp16 only: float32 attention stays on cuBLAS, exact to it."""
    path = write_problem(tmp_path, name, _source(name, "float32"))
    graph, applied = _graph(path)
    assert not any(n.kind == "attn" for n in graph.nodes)
    assert not any(a.name == "written_out_attention" for a in applied)
    got, want = _run(path, graph, f"pattern32_{name}")
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["windows", "mingpt", "t5"])
def test_the_sdpa_path_computes_the_rewritten_node(tmp_path: Path, name: str) -> None:
    """The program's vendor line for each rewritten site (the shifted-window mask through a
    batch split into (images, windows)) writes what the node computes."""
    from .test_attention_choice import _vendor_values

    path = write_problem(tmp_path, name, _source(name, "bfloat16"))
    found = _vendor_values(path, f"pattern_vendor_{name}")
    assert len(found) == CASES[name]
    for origin, got, want in found:
        assert got.shape == want.shape and got.dtype == want.dtype, origin
        torch.testing.assert_close(got.float(), want.float(), rtol=2e-2, atol=2e-2, msg=origin)


@pytest.mark.parametrize("name", ["windows", "mingpt", "t5"])
def test_rewritten_attention_launches_on_the_cpu(tmp_path: Path, name: str) -> None:
    """Every launch of the program, the flash kernels with the repeating mask included, in host
    emulation against the graph's values."""
    from .host_kernels import check_program, nvcc_include, seeded_problem

    include = nvcc_include()
    if include is None:
        pytest.skip("needs nvcc's CUDA headers and g++")
    path = write_problem(tmp_path, name, _source(name, "bfloat16"))
    model, inputs = seeded_problem(path, f"pattern_host_{name}")
    assert check_program(path, model, inputs, include) == []


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", ["windows", "mingpt", "t5"])
def test_rewritten_attention_matches_the_model_on_the_gpu(tmp_path: Path, name: str) -> None:
    from stitch_lsp.runtime.choice import OURS, VENDOR

    from .test_attention import _sites

    ref_path = write_problem(tmp_path, name, _source(name, "bfloat16"))
    ref, new, model, _ = on_gpu(ref_path, f"pattern_{name}")
    source = ref_path.with_name(f"{name}_builtin.py").read_text()
    assert "stitch_flash_attn<" in source
    dev = torch.device("cuda")
    sites = _sites(source)
    for forced in (None, OURS, VENDOR):
        model_new = fresh_candidate(new, model)
        if forced is not None and sites:
            new._choice(model_new).picked = {k: forced for k in sites}
        for call in range(3):  # the first call runs plainly, later ones replay a CUDA graph
            torch.manual_seed(30 + call)
            inputs = [t.to(dev) for t in ref.get_inputs()]
            with torch.no_grad():
                want = model.float()(*[t.float() for t in inputs])
                model.to(inputs[0].dtype)
                got = model_new(*inputs)
            torch.testing.assert_close(
                got.float(), want, rtol=2e-2, atol=2e-2, msg=lambda m, f=forced: f"{f}: {m}"
            )


_CROSS = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q = nn.Linear(64, 64)
        self.kv = nn.Linear(48, 128)
        self.o = nn.Linear(64, 64)
        self.to(torch.float16)

    def forward(self, x: torch.Tensor, ctx: torch.Tensor, pad: torch.Tensor) -> torch.Tensor:
        b, l, _ = x.shape
        s = ctx.shape[1]
        q = self.q(x).view(b, l, 2, 32).transpose(1, 2)
        k, v = self.kv(ctx).view(b, s, 2, 2, 32).permute(2, 0, 3, 1, 4)
        w = (q @ k.transpose(-1, -2)) / 32 ** 0.5 + pad[:, None, None, :]
        w = w.softmax(dim=-1)
        return x + self.o((w @ v).transpose(1, 2).reshape(b, l, 64))


def get_inputs():
    pad = torch.zeros(3, {keys}, dtype=torch.float16)
    pad[1, -5:] = float("-inf")
    return [torch.randn(3, {queries}, 64, dtype=torch.float16),
            torch.randn(3, {keys}, 48, dtype=torch.float16), pad]


def get_init_inputs():
    return []
"""


@pytest.mark.parametrize(("queries", "keys"), [(7, 33), (1, 70), (65, 65)])
def test_cross_and_decode_shapes_in_fp16(tmp_path: Path, queries: int, keys: int) -> None:
    """Cross-attention (queries and keys of other lengths, a padding mask from an input), a
    single query and a tile's worth plus one, in fp16: one node each, the model's values, and
    every launch in host emulation."""
    from .host_kernels import check_program, nvcc_include, seeded_problem

    name = f"cross_{queries}_{keys}"
    source = _CROSS.replace("{queries}", str(queries)).replace("{keys}", str(keys))
    path = write_problem(tmp_path, name, source)
    graph, _ = _graph(path)
    assert sum(n.kind == "attn" for n in graph.nodes) == 1, graph.summary()
    got, want = _run(path, graph, f"pattern_{name}")
    torch.testing.assert_close(got[0].float(), want[0].float(), rtol=2e-2, atol=2e-2)
    include = nvcc_include()
    if include is not None:
        model, inputs = seeded_problem(path, f"pattern_host_{name}")
        assert check_program(path, model, inputs, include) == []
