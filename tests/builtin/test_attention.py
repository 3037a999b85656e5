"""scaled_dot_product_attention kept whole: in bf16/fp16 one flash kernel (`attn` node), in
float32 or at head sizes off the kernel's tiles the math form on cuBLAS.

CPU: the capture holds one attention node per call and computes what the model computes
(tests/builtin/interp.py), the kernel's instantiations compile with nvcc for sm_90a.
GPU: the generated program matches the model (bf16/fp16 tolerance, 1e-2) for causal, boolean,
additive and GQA attention and a single-query decode step.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .helpers import generate_for, import_path, on_gpu, serious_findings, write_problem
from .interp import run_graph

torch = pytest.importorskip("torch")

_TEMPLATE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.hd = {heads}, {kv_heads}, {hd}
        dim = {heads} * {hd}
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * {kv_heads} * {hd}, bias=False)
        self.to(torch.{dtype})

    def forward(self, x: torch.Tensor, ctx: torch.Tensor{extra_arg}) -> torch.Tensor:
        b, l, _ = x.shape
        s = ctx.shape[1]
        q = self.q(x).view(b, l, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(ctx).view(b, s, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        {mask_line}
        y = F.scaled_dot_product_attention(q, k, v, {call})
        return y.transpose(1, 2).reshape(b, l, -1)


def get_inputs():
    x = torch.randn(2, {lq}, {heads} * {hd}, dtype=torch.{dtype})
    ctx = torch.randn(2, {lk}, {heads} * {hd}, dtype=torch.{dtype})
    return [x, ctx{extra_input}]


def get_init_inputs():
    return []
"""


def _case(
    *,
    dtype: str = "bfloat16",
    heads: int = 4,
    kv_heads: int = 4,
    hd: int = 64,
    lq: int = 100,
    lk: int = 100,
    call: str = "",
    mask_line: str = "pass",
    extra_arg: str = "",
    extra_input: str = "",
    gqa: bool = True,
) -> str:
    if kv_heads != heads and gqa:
        call = (call + ", " if call else "") + "enable_gqa=True"
    return _TEMPLATE.format(
        dtype=dtype, heads=heads, kv_heads=kv_heads, hd=hd, lq=lq, lk=lk, call=call,
        mask_line=mask_line, extra_arg=extra_arg, extra_input=extra_input,
    )  # fmt: skip


# name -> (source, attention nodes the capture holds: 1 flash, 0 the math form)
CASES: dict[str, tuple[str, int]] = {
    "plain_bf16": (_case(lq=77, lk=130), 1),
    "causal_bf16": (_case(lq=150, lk=150, call="is_causal=True"), 1),
    "causal_fp16_gqa": (
        _case(dtype="float16", heads=8, kv_heads=2, lq=129, lk=129, call="is_causal=True"),
        1,
    ),
    "bool_mask_bf16": (
        _case(
            lq=96,
            lk=96,
            hd=128,
            call="attn_mask=keep",
            mask_line="keep = torch.arange(s, device=x.device)[None, :] <= "
            "torch.arange(l, device=x.device)[:, None] + 3",
        ),
        1,
    ),
    "additive_mask_bf16": (
        _case(
            lq=64,
            lk=200,
            heads=8,
            kv_heads=4,
            call="attn_mask=bias",
            extra_arg=", bias: torch.Tensor",
            extra_input=", (torch.randn(2, 1, 1, 200) * 2).bfloat16()",
        ),
        1,
    ),
    "decode_step_bf16": (_case(lq=1, lk=333, heads=8, kv_heads=2, hd=128), 1),
    # transformers' repeat_kv (expand, reshape): read in place as GQA, the copies left out
    "repeat_kv_bf16": (
        _case(
            heads=4,
            kv_heads=2,
            lq=70,
            lk=70,
            call="is_causal=True",
            gqa=False,
            mask_line="k, v = (t[:, :, None].expand(b, 2, 2, s, 64).reshape(b, 4, s, 64) "
            "for t in (k, v))",
        ),
        1,
    ),
    # Falcon's multi-query attention: one key/value head that broadcasts, no enable_gqa
    "multi_query_bf16": (
        _case(heads=4, kv_heads=1, lq=90, lk=90, call="is_causal=True", gqa=False),
        1,
    ),
    "multi_query_float32": (
        _case(dtype="float32", heads=4, kv_heads=1, lq=30, lk=30, gqa=False),
        0,
    ),
    # masks built from shapes alone (transformers' decoders under a trace): folded at capture
    "constant_causal_mask_bf16": (
        _case(
            lq=80,
            lk=80,
            call="attn_mask=keep",
            mask_line="keep = torch.arange(s, device=x.device)[None, :] <= "
            "torch.arange(l, device=x.device)[:, None]",
        ),
        1,
    ),
    "constant_additive_causal_mask_bf16": (
        _case(
            lq=50,
            lk=50,
            call="attn_mask=bias",
            mask_line="bias = torch.full((l, s), torch.finfo(x.dtype).min, device=x.device)"
            ".triu(1).to(x.dtype)",
        ),
        1,
    ),
    # a mask read from an input stays a mask
    "input_mask_bf16": (
        _case(
            lq=40,
            lk=40,
            call="attn_mask=keep",
            mask_line="keep = (ctx[:, None, None, :, 0] > -1.0)",
        ),
        1,
    ),
    # few query rows over GQA: the group's query heads share one tile (PACK), across two tiles
    # that split a head's rows, causal; then split keys with a mask that differs per head
    "packed_causal_gqa_bf16": (
        _case(heads=8, kv_heads=2, lq=20, lk=150, call="is_causal=True"),
        1,
    ),
    "packed_mask_per_head_fp16": (
        _case(
            dtype="float16",
            heads=6,
            kv_heads=2,
            lq=3,
            lk=400,
            call="attn_mask=keep",
            extra_arg=", keep: torch.Tensor",
            extra_input=", torch.rand(2, 6, 3, 400) > 0.3",
        ),
        1,
    ),
    "head_40_bf16": (_case(hd=40, lq=40, lk=40, call="is_causal=True"), 0),
    # an odd number of 16-wide steps along the head (80 = 5 x 16)
    "head_80_bf16": (_case(hd=80, lq=70, lk=90, call="is_causal=True"), 1),
    "float32": (_case(dtype="float32", lq=40, lk=50, call="is_causal=True"), 0),
}


def _capture(path: Path) -> Any:
    from stitch_lsp.compiler.worker.capture import capture

    return capture(path)


def _model(path: Path, name: str) -> tuple[Any, list[Any]]:
    mod = import_path(path, f"attn_{name}")
    torch.manual_seed(0)
    model = mod.Model().eval()
    torch.manual_seed(1)
    return model, list(mod.get_inputs())


@pytest.mark.parametrize("name", sorted(CASES))
def test_attention_is_one_node_and_computes_the_model(tmp_path: Path, name: str) -> None:
    source, flash = CASES[name]
    path = write_problem(tmp_path, name, source)
    graph = _capture(path)
    attn = [n for n in graph.nodes if n.kind == "attn"]
    assert len(attn) == flash, graph.summary()
    if name == "repeat_kv_bf16":
        assert attn[0].uses[1].shape[1] == 2 and attn[0].uses[2].shape[1] == 2
        assert not any(n.kind == "ew" and len(n.shape) == 5 for n in graph.nodes)
    if not flash:  # the math form: two GEMMs and a softmax, in the model's precision
        assert sum(n.kind == "gemm" and n.params.get("batch", 1) > 1 for n in graph.nodes) == 2
    model, inputs = _model(path, name)
    with torch.no_grad():
        want = model(*inputs).float()
        (got,) = run_graph(graph, model, inputs)
    tol = 2e-2 if "float32" not in name else 1e-5
    torch.testing.assert_close(got.float(), want, rtol=tol, atol=tol)


# name -> (causal, mask kind) of the attention node after capture
FOLDED = {
    "constant_causal_mask_bf16": (True, ""),
    "constant_additive_causal_mask_bf16": (True, ""),
    "bool_mask_bf16": (False, "bool"),  # constant, but not the causal pattern
    "input_mask_bf16": (False, "bool"),
}


@pytest.mark.parametrize("name", sorted(FOLDED))
def test_constant_masks_are_folded_into_is_causal(tmp_path: Path, name: str) -> None:
    """A mask made from shapes alone that is exactly causal becomes `is_causal` (the flash
    kernel then skips the tiles above the diagonal and reads no mask); others stay masks."""
    graph = _capture(write_problem(tmp_path, name, CASES[name][0]))
    (attn,) = [n for n in graph.nodes if n.kind == "attn"]
    assert (attn.params["causal"], attn.params["mask"]) == FOLDED[name]


def test_the_candidate_says_which_masks_became_is_causal(tmp_path: Path) -> None:
    cand = generate_for(write_problem(tmp_path, "folded", CASES["constant_causal_mask_bf16"][0]))
    assert cand.handled, cand.reason
    assert (
        "Capture: attention masks built from shapes alone, evaluated at capture: "
        "1 became is_causal." in cand.source
    )


# nn.MultiheadAttention and nn.TransformerEncoderLayer reach sdpa from inside
# F.multi_head_attention_forward, a torch function the capture's mode hands on whole.
_MODULES = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mha = nn.MultiheadAttention(64, 4, batch_first=True)
        self.layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.mha(x, x, x, need_weights=False)
        return self.layer(x + y)


def get_inputs():
    return [torch.randn(2, 24, 64, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
"""


def test_torch_attention_modules_are_captured_as_attention(tmp_path: Path) -> None:
    path = write_problem(tmp_path, "torch_modules", _MODULES)
    graph = _capture(path)
    assert sum(n.kind == "attn" for n in graph.nodes) == 2, graph.summary()
    model, inputs = _model(path, "torch_modules")
    with torch.no_grad():
        want = model(*inputs).float()
        (got,) = run_graph(graph, model, inputs)
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)
    import torch.nn.functional as F

    assert F.scaled_dot_product_attention is torch._C._nn.scaled_dot_product_attention


def test_attention_reads_the_packed_projection_without_a_copy(tmp_path: Path) -> None:
    """nn.MultiheadAttention splits its packed q/k/v projection with `.contiguous()`: the
    flash operands read the projection by strides instead, so no copy of it is made."""
    path = write_problem(tmp_path, "packed", _MODULES)
    graph = _capture(path)
    for n in graph.nodes:
        if n.kind != "attn":
            continue
        for u in n.uses[:3]:
            src = graph.node(u.vid)
            assert src is not None and src.fn != "identity", graph.summary()


def test_compose_reads_a_copy_from_its_source() -> None:
    """layout.compose: a read of a contiguous copy of a view, as a read of the view's source,
    element for element; a step that would carry across the source's dims is refused."""
    from stitch_lsp.compiler import layout
    from stitch_lsp.compiler.ir import Use

    source = torch.arange(17 * 2 * 96).reshape(17, 2, 96)
    # The packed projection viewed as (3, L, N, E), as MultiheadAttention's split reads it.
    base = layout.permute(layout.view(Use(1, (17, 2, 96)), (17, 2, 3, 32)), (2, 0, 1, 3))
    copy = source.view(17, 2, 3, 32).permute(2, 0, 1, 3).contiguous()

    def read(u: Use, t: Any) -> Any:
        return t.reshape(-1).as_strided(u.shape, layout.strides_of(u), u.offset)

    for part in range(3):  # q, k, v as (N, H, L, D) with two heads of 16
        u = Use(2, (2, 2, 17, 16), strides=(32, 16, 64, 1), offset=part * 17 * 2 * 32)
        got = layout.compose(u, base, source.numel())
        assert got is not None
        assert torch.equal(read(got, source), read(u, copy))
    assert layout.compose(Use(2, (3, 17, 64)), base, source.numel()) is None


def test_dropout_attention_is_refused_as_random(tmp_path: Path) -> None:
    from stitch_lsp.compiler.ir import Unsupported

    source = _case(call="dropout_p=0.1")
    with pytest.raises(Unsupported, match="random"):
        _capture(write_problem(tmp_path, "dropout", source))


def test_keys_are_split_only_where_the_grid_leaves_sms_idle() -> None:
    """A decode step's 8 CTAs over 2,048 keys spread their keys over 128 CTAs; ViT-S's 192 CTAs
    over 197 keys already cover the 132 SMs, so no split, and no combine launch, follows."""
    from stitch_lsp.compiler.attention import MAX_SPLITS, key_splits
    from stitch_lsp.compiler.target import ASSUMED_SMS

    assert key_splits(8, 2048) == (16, 128)
    assert key_splits(4 * 6 * 8, 197) == (1, 256)
    assert key_splits(ASSUMED_SMS, 4096) == (1, 4096)
    assert key_splits(ASSUMED_SMS - 1, 4096) == (3, 22 * 64)  # about twice the SMs' worth of CTAs
    assert key_splits(1, 180) == (1, 192)  # under four tiles: nothing to share out
    assert key_splits(1, 65536)[0] == MAX_SPLITS  # one CTA over a long cache: capped


@pytest.mark.slow
@pytest.mark.parametrize("name", ["causal_fp16_gqa", "decode_step_bf16"])
def test_flash_candidates_pass_the_static_checks(tmp_path: Path, name: str) -> None:
    """Our own flash kernels are never flagged: the CUDA parses (tree-sitter), every kernel is
    launched (the split merge only where a launch splits): no warning, no error."""
    source, _ = CASES[name]
    cand = generate_for(write_problem(tmp_path, name, source))
    assert cand.handled, cand.reason
    merged = "stitch_flash_combine<" in (cand.cuda_source or "")
    assert merged == (name == "decode_step_bf16")
    path = tmp_path / f"{name}_builtin.py"
    path.write_text(cand.source or "")
    assert not serious_findings(path)


@pytest.mark.slow
def test_flash_kernels_compile_for_hopper(tmp_path: Path) -> None:
    """Every flash instantiation of the cases (bf16, fp16, masks, GQA, head 128) builds."""
    from stitch_lsp.compiler.codegen import Codegen
    from stitch_lsp.compiler.partition import partition

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    parts = []
    for name, (source, flash) in CASES.items():
        if not flash:
            continue
        graph = _capture(write_problem(tmp_path, name, source))
        cg = Codegen(graph, partition(graph))
        src = cg.cuda_source(with_gemm=False)
        assert "stitch_flash_attn<" in src
        (tmp_path / f"{name}.cu").write_text(src)
        parts.append(tmp_path / f"{name}.cu")
    for cu in parts:
        done = subprocess.run(
            [nvcc, "-arch=sm_90a", "-std=c++17", "-c", str(cu), "-o", str(cu.with_suffix(".o"))],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(n for n, (_, flash) in CASES.items() if flash))
def test_flash_attention_matches_the_model_on_the_gpu(tmp_path: Path, name: str) -> None:
    source, _ = CASES[name]
    ref_path = write_problem(tmp_path, name, source)
    ref, _, model, model_new = on_gpu(ref_path, f"flash_{name}")
    assert "stitch_flash_attn<" in ref_path.with_name(f"{name}_builtin.py").read_text()
    dev = torch.device("cuda")
    for call in range(3):  # the first call runs plainly, later ones replay a CUDA graph
        torch.manual_seed(10 + call)
        inputs = [t.to(dev) for t in ref.get_inputs()]
        with torch.no_grad():
            want = model.float()(*[t.float() for t in inputs])  # fp32 math on the same weights
            model.to(inputs[0].dtype)
            got = model_new(*inputs)
            eager = model(*inputs)
        torch.cuda.synchronize()
        assert got.dtype == inputs[0].dtype and got.shape == want.shape
        err = (got.float() - want).abs().max().item()
        eager_err = (eager.float() - want).abs().max().item()
        note = f"(eager's max error {eager_err:.3g}, ours {err:.3g})"
        if err <= 1.1 * eager_err:
            continue  # as close to the fp32 math as eager in this type (long fp16 sums)
        torch.testing.assert_close(
            got.float(), want, rtol=1e-2, atol=1e-2, msg=lambda m, note=note: f"{m} {note}"
        )


@pytest.mark.gpu
@pytest.mark.slow
def test_both_attention_paths_match_the_model_on_the_gpu(tmp_path: Path) -> None:
    """nn.MultiheadAttention and nn.TransformerEncoderLayer: each attention site may run our
    flash kernel or PyTorch's sdpa, whichever the first call times faster. Both paths, forced
    in turn, and the timed choice, all match the model (replayed under a CUDA graph too)."""
    from stitch_lsp.runtime.choice import OURS, VENDOR

    ref_path = write_problem(tmp_path, "modules_choice", _MODULES)
    cand = generate_for(ref_path)
    assert cand.handled, cand.reason
    assert (cand.source or "").count("choice.run(") == 2
    cand_path = tmp_path / "modules_choice_builtin.py"
    cand_path.write_text(cand.source or "")
    ref = import_path(ref_path, "gpu_ref_modules_choice")
    new = import_path(cand_path, "gpu_new_modules_choice")
    dev = torch.device("cuda")
    torch.manual_seed(0)
    model = ref.Model().to(dev).eval()
    for forced in (None, OURS, VENDOR):
        model_new = new.ModelNew().to(dev).eval()
        model_new.load_state_dict(model.state_dict())
        if forced is not None:
            choice = new._choice(model_new)
            choice.picked = {k: forced for k in _sites(cand.source or "")}
        for call in range(3):
            torch.manual_seed(20 + call)
            inputs = [t.to(dev) for t in ref.get_inputs()]
            with torch.no_grad():
                want = model(*inputs).float()
                got = model_new(*inputs).float()
            torch.testing.assert_close(
                got, want, rtol=2e-2, atol=2e-2, msg=lambda m, f=forced: f"{f}: {m}"
            )
        picked = new._choice(model_new).picked
        assert set(picked) == set(_sites(cand.source or "")), picked
        assert forced is None or set(picked.values()) == {forced}


def _sites(source: str) -> list[str]:
    import re

    return re.findall(r"choice\.run\('(\w+)'", source)
