"""ATen fallbacks: an op the coder cannot lower runs as its traced ATen call inside the program.

Each case is checked three ways on the CPU: the captured graph (fallbacks included) against the
model itself through the tests' interpreter; the program's own fallback lines, executed with CPU
tensors, against the interpreter's values (so the views, predicates and copies the program
writes around a call are what the trace recorded); and the plan and the file's docstring, which
must name every fallback and why.
"""

from __future__ import annotations

import ast
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from stitch_lsp.compiler.codegen import Codegen
from stitch_lsp.compiler.ir import Graph, Unsupported
from stitch_lsp.compiler.partition import fold_gemm_epilogues, partition
from stitch_lsp.compiler.program import build_program

from .helpers import generate_for, import_path, write_problem
from .interp import run_graph, run_graph_env
from .problems import problem

torch = pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]

# cumprod has no lowering: one float32 fallback between two generated kernels.
CUMPROD = problem(
    "self.fc = nn.Linear(24, 24)",
    "x = torch.relu(self.fc(x))\n"
    "y = torch.cumprod(x * 0.5 + 0.75, dim=1)\n"
    "return torch.tanh(y) * 2.0",
    "torch.randn(6, 24)",
)
# sort returns (values, indices): one call, two results; the int64 indices go on in PyTorch.
SORT = problem(
    "",
    "v, i = torch.sort(x * 3.0, dim=-1)\nreturn torch.sigmoid(v) + i.float() * 0.01",
    "torch.randn(5, 17)",
)
# An in-place op without a lowering on the program's own value runs as its out-of-place twin.
IN_PLACE = problem(
    "",
    "y = torch.tanh(x) * 0.5\ny.erfinv_()\nreturn y * 3.0 + 1.0",
    "torch.randn(4, 33)",
)
# Integer bookkeeping (positions from an arange, a causal mask) stays in PyTorch; the float math
# that reads its results is generated.
MASKED = problem(
    "self.register_buffer('pos', torch.randn(16, 8))",
    "\n".join(
        [
            "n = x.shape[1]",
            "idx = torch.arange(n, device=x.device)",
            "keep = idx[None, :] <= idx[:, None]",
            "s = (x @ x.transpose(1, 2)).masked_fill(~keep, float('-inf'))",
            "p = torch.softmax(s, dim=-1)",
            "return p @ (x + self.pos[idx % 16][None])",
        ]
    ),
    "torch.randn(2, 12, 8)",
)

# Swin's shifted-window mask: zeros made in PyTorch, written in place slice by slice, then read
# by generated kernels (the writes run in order, before any read).
WINDOW_MASK = problem(
    "",
    "\n".join(
        [
            "mask = x.new_zeros((6, 6))",
            "count = 0",
            "for h in ((0, 2), (2, 4), (4, None)):",
            "    for w in ((0, 3), (3, None)):",
            "        mask[h[0] : h[1], w[0] : w[1]] = count",
            "        count += 1",
            "return torch.softmax(x * 2.0 + mask, dim=-1)",
        ]
    ),
    "torch.randn(2, 6, 6)",
)

# FNet's token mixing: the real part of a 2-D FFT over (sequence, hidden). The spectrum is
# complex, so only PyTorch lines read it; the kernels read its real part.
FOURIER = problem(
    "self.fc = nn.Linear(8, 8)",
    "y = torch.fft.fftn(torch.tanh(self.fc(x)), dim=(1, 2)).real\nreturn torch.relu(y + x)",
    "torch.randn(2, 6, 8)",
)


def _fresh(tmp_path: Path, name: str, source: str) -> tuple[Path, Any, list[Any]]:
    path = write_problem(tmp_path, name, source)
    mod = import_path(path, f"fallback_{name}")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval()
    torch.manual_seed(1)
    return path, model, list(mod.get_inputs())


def _capture(path: Path) -> Graph:
    from stitch_lsp.compiler.worker.capture import capture

    return capture(path)


def _run_fallback_lines(graph: Graph, model: Any, inputs: list[Any]) -> None:
    """Execute the program's fallback stages with CPU tensors and compare each result with the
    interpreter's: every value a stage reads is the interpreter's, stored as the program stores
    it (our kernels keep predicates as 1.0 / 0.0 floats)."""
    groups = fold_gemm_epilogues(graph, partition(graph))
    cg = Codegen(graph, groups)
    cg.cuda_source()
    program = build_program(graph, groups, cg)
    env = run_graph_env(graph, model, inputs)
    leaves = [env[lf.vid] for lf in graph.leaves.values() if lf.kind in ("param", "buffer")]
    scope: dict[str, Any] = {"torch": torch, "dev": torch.device("cpu"), "leaves": leaves}
    scope.update(zip(graph.input_names, inputs, strict=False))
    for vid, value in env.items():
        node = graph.node(vid)
        stored = value
        if node is not None and node.kind != "aten" and node.dtype == "bool":
            stored = value.float()
        scope[f"t{vid}"] = stored
    checked = 0
    made: dict[int, str] = {}
    for st in program.stages:
        if st.group.kind != "aten":
            continue
        for line in st.lines:
            if line.startswith("#"):
                continue
            exec(line, scope)  # the program's own line
            m = re.match(r"t(\d+) = ", line)
            if m:
                made[int(m.group(1))] = line
    # compared once every stage has run: an in-place line (a mask written slice by slice)
    # changes a value after the line that made it, as the interpreter's final value shows
    for vid, line in made.items():
        want = env[vid]
        got = scope[f"t{vid}"]
        if isinstance(want, torch.Tensor):
            assert got.dtype == want.dtype, line
            torch.testing.assert_close(got.reshape(want.shape), want, msg=line)
            checked += 1
    assert checked, "no fallback line was checked"


@pytest.mark.parametrize(
    ("name", "source", "fallback"),
    [
        ("cumprod", CUMPROD, "cumprod.default"),
        ("sort", SORT, "sort.default"),
        ("erfinv_in_place", IN_PLACE, "erfinv.default"),
        ("arange_mask", MASKED, "arange.default"),
        ("window_mask", WINDOW_MASK, "full.default"),
        ("fourier", FOURIER, "_fft_c2c.default"),
    ],
)
def test_an_unlowered_op_runs_as_its_aten_call(
    tmp_path: Path, name: str, source: str, fallback: str
) -> None:
    path, model, inputs = _fresh(tmp_path, name, source)
    graph = _capture(path)
    calls = [n.fn for n in graph.nodes if n.kind == "aten"]
    assert fallback in calls, calls
    assert any(n.kind != "aten" for n in graph.nodes), "the rest is generated"
    with torch.no_grad():
        want = model(*inputs)
        (got,) = run_graph(graph, model, inputs)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    _run_fallback_lines(graph, model, inputs)


def test_the_plan_and_the_file_name_each_fallback_and_why(tmp_path: Path) -> None:
    path, _, _ = _fresh(tmp_path, "cumprod_plan", CUMPROD)
    cand = generate_for(path)
    assert cand.handled, cand.reason
    ast.parse(cand.source)
    doc = ast.get_docstring(ast.parse(cand.source)) or ""
    assert "PyTorch fallback (1 ATen call(s)):" in doc
    assert (
        "torch.ops.aten.cumprod.default: torch.cumprod (line 12); no lowering in the op catalogue"
        in doc
    )
    (group,) = [g for g in cand.groups if g.kind == "aten"]
    assert group.library == "PyTorch (ATen fallback: not generated)"
    assert group.ops == ["torch.cumprod (line 12) [aten.cumprod.default]"]
    assert group.lines == [12]
    assert "t" in cand.source and "torch.ops.aten.cumprod.default(" in cand.source
    # the generated kernels around it remain: a GEMM and fused elementwise kernels
    kinds = [g.kind for g in cand.groups]
    assert "gemm" in kinds and kinds.count("pointwise") >= 1


def test_heavy_ops_never_fall_back() -> None:
    from torch.fx.experimental.proxy_tensor import make_fx

    from stitch_lsp.compiler.worker.fallback import IN_PLACE as WRITES
    from stitch_lsp.compiler.worker.fallback import refusal

    def f(a: Any, b: Any, w: Any) -> Any:
        c = torch.mm(a, b)
        c.add_(1.0)
        d = torch.nn.functional.conv2d(a[None, None], w)
        return c, d, torch.rand(3)

    gm = make_fx(f)(torch.randn(4, 4), torch.randn(4, 4), torch.randn(1, 1, 3, 3))
    why = {str(n.target): refusal(n) for n in gm.graph.nodes if n.op == "call_function"}
    assert "heavy op" in str(why["aten.mm.default"])
    assert "heavy op" in str(why["aten.convolution.default"])
    assert why["aten.add_.Tensor"] == WRITES
    assert why["aten.rand.default"] == "it draws random numbers"


def test_a_refusal_says_why_the_op_cannot_fall_back(tmp_path: Path) -> None:
    # A random op inside forward: neither generated nor a fallback (the candidate could not
    # draw the reference's numbers).
    src = problem("", "return x + torch.bernoulli(torch.sigmoid(x))", "torch.randn(4, 8)")
    path, model, inputs = _fresh(tmp_path, "bernoulli", src)
    with pytest.raises(Unsupported, match="random numbers"):
        _capture(path)
    from stitch_lsp.compiler.worker.capture import build_on_meta
    from stitch_lsp.compiler.worker.capture_aten import capture_aten

    model, inputs = build_on_meta(path)
    with pytest.raises(Unsupported, match="cannot run as a PyTorch fallback: it draws random"):
        capture_aten(model, inputs, ["x"], str(path))


DECODE = REPO / "tests" / "data" / "stitch_problems" / "level3" / "1_LlamaDecodeStep.py"


def test_the_decode_steps_cache_update_is_stored_by_the_kernels_into_the_buffer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`k_cache.index_copy_(2, pos, k)`: the rotary kernel stores k straight into the cache's
    slot, and the v copy joins that kernel; no PyTorch call runs for either."""
    monkeypatch.setenv("STITCH_MODEL_SIZE", "small")
    monkeypatch.setenv("STITCH_MODEL_DTYPE", "float32")
    graph = _capture(DECODE)
    updates = [n for n in graph.nodes if n.kind == "index_store"]
    assert [n.params["dim"] for n in updates] == [2] * 4  # k and v, two layers
    assert not [n for n in graph.nodes if n.kind == "aten" and n.params.get("effect")]
    paths = {graph.leaves[n.uses[2].vid].path for n in updates}
    assert paths == {f"layers.{i}.{kv}_cache" for i in (0, 1) for kv in "kv"}
    mod = import_path(DECODE, "fallback_decode")
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).eval()
    twin = mod.Model(*mod.get_init_inputs()).eval()
    torch.manual_seed(1)
    inputs = list(mod.get_inputs())
    with torch.no_grad():
        want = model(*inputs)
        (got,) = run_graph(graph, twin, inputs)
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    # the interpreted program wrote the new token's slot into its own cache, as the model did
    torch.testing.assert_close(twin.layers[0].k_cache, model.layers[0].k_cache)
    cand = generate_for(DECODE)
    assert cand.handled, cand.reason
    fallbacks = [line for line in cand.source.splitlines() if "torch.ops" in line]
    assert not [line for line in fallbacks if "index_copy_" in line]
    stores = [g for g in cand.groups if "torch.index_copy_" in " ".join(g.ops)]
    assert len(stores) == 2 and all(g.kind == "pointwise" for g in stores)  # k and v per layer


@pytest.mark.parametrize(
    ("name", "init", "forward", "inputs", "handled"),
    [
        ("matmul_alone", "", "return torch.matmul(x, x)", "torch.randn(64, 64)", False),
        ("linear_alone", "self.fc = nn.Linear(64, 32, bias=False)", "return self.fc(x)",
         "torch.randn(8, 64)", False),
        # the bias and ReLU run in the cuBLASLt epilogue: that epilogue is the fusion
        ("linear_relu", "self.fc = nn.Linear(64, 32)", "return torch.relu(self.fc(x))",
         "torch.randn(8, 64)", True),
        ("matmul_scaled", "", "return torch.matmul(x, x) * 0.5", "torch.randn(64, 64)", True),
    ],
)  # fmt: skip
def test_a_program_that_only_calls_the_library_is_refused(
    tmp_path: Path, name: str, init: str, forward: str, inputs: str, handled: bool
) -> None:
    cand = generate_for(write_problem(tmp_path, name, problem(init, forward, inputs)))
    assert cand.handled is handled, cand.reason
    if not handled:
        assert cand.reason.startswith("nothing to generate: the module is a matrix product alone")


INF_FILL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, limit=float("inf")):
        scores = torch.full((x.shape[0], 4), float("-inf"))
        scores[:, :2] = x[:, :2]  # written in place: PyTorch makes the fill
        table = torch.tensor([float("inf"), 0.0, 0.0, 1.0])
        return torch.softmax(scores, dim=-1) + table.clamp(max=limit).isinf()


def get_inputs():
    return [torch.randn(8, 4)]


def get_init_inputs():
    return []
"""


def test_infinities_are_spelled_as_python_can_read_them(tmp_path: Path) -> None:
    """A fill of -inf, a constant table holding inf and a default of inf become
    `float('-inf')` and `float('inf')` in the generated file: `-inf` alone is a NameError."""
    path = tmp_path / "inf_fill.py"
    path.write_text(INF_FILL)
    cand = generate_for(path)
    assert cand.handled, cand.reason
    src = cand.source or ""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # `x is not 1.5` would be a SyntaxWarning
        compile(src, "inf_fill_new.py", "exec")
    assert "if repr(limit) != 'inf':" in src
    names = {node.id for node in ast.walk(ast.parse(src)) if isinstance(node, ast.Name)}
    assert "inf" not in names and "nan" not in names
    assert "float('-inf')" in src


DATA_DEPENDENT_MOE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Router(nn.Module):
    def __init__(self, dim, experts):
        super().__init__()
        self.gate = nn.Linear(dim, experts, bias=False)

    def forward(self, x):
        top = self.gate(x).topk(1, dim=-1).indices[:, 0]
        counts = torch.bincount(top, minlength=self.gate.out_features).tolist()  # Python ints
        return top, counts


class Experts(nn.Module):
    def __init__(self, dim, experts):
        super().__init__()
        self.router = Router(dim, experts)
        self.up = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

    def forward(self, x):
        top, counts = self.router(x)
        out = torch.zeros_like(x)
        for e, n in enumerate(counts):  # the experts this batch hit, and how many tokens each
            if n:
                rows = (top == e).nonzero()[:, 0]
                out[rows] = self.up[e](x[rows])
        return out


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.moe = Experts(32, 4)

    def forward(self, x):
        h = self.norm(x)
        return F.gelu(self.moe(h) + x) * 2.0


def get_inputs():
    return [torch.randn(64, 32)]


def get_init_inputs():
    return []
"""


def test_a_data_dependent_submodule_runs_as_a_pytorch_call(tmp_path: Path) -> None:
    """The experts' loop depends on the routing's values: the trace stops there. The router
    returns Python counts, so it cannot be one call; its parent, the experts block, is. The
    program calls it by its path, generates the norm and the GELU around it, runs on plain
    launches (the call syncs with the host) and computes what the model computes."""
    path = tmp_path / "data_dependent_moe.py"
    path.write_text(DATA_DEPENDENT_MOE)
    graph = _capture(path)
    calls = [n for n in graph.nodes if n.kind == "aten" and n.params.get("syncs")]
    assert [n.params["call"] for n in calls] == ["self.get_submodule('moe')({0})"]
    assert "Experts" in str(calls[0].params["display"])
    assert "data-dependent modules run as PyTorch calls (Experts)" in " ".join(graph.notes)
    _computes_what_the_model_does(graph, path)
    cand = generate_for(path)
    assert cand.handled, cand.reason
    src = cand.source or ""
    assert "self.get_submodule('moe')(" in src
    assert "plain='self.moe (Experts): DynamicOutputShapeException: aten.bincount" in src
    assert any(g.kind == "pointwise" or g.kind == "reduction" for g in cand.groups)


def test_a_module_called_through_another_method_is_made_opaque_by_its_caller(
    tmp_path: Path,
) -> None:
    """JetMoE's attention calls its experts through `.map()`, not forward: making the experts
    one call does not stop the trace there, so the module whose forward calls `.map()` becomes
    the call; the model's own ops around it are still generated."""
    source = (
        DATA_DEPENDENT_MOE.replace(
            "    def forward(self, x):\n        top, counts = self.router(x)",
            "    def forward(self, x):\n        return self.map(x)\n\n"
            "    def map(self, x):\n        top, counts = self.router(x)",
        )
        .replace(
            "class Model(nn.Module):",
            "class Block(nn.Module):\n"
            "    def __init__(self):\n"
            "        super().__init__()\n"
            "        self.moe = Experts(32, 4)\n\n"
            "    def forward(self, h):\n"
            "        return self.moe.map(h) * 0.5\n\n\n"
            "class Model(nn.Module):",
        )
        .replace(
            "        self.moe = Experts(32, 4)\n\n    def forward(self, x):",
            "        self.block = Block()\n\n    def forward(self, x):",
        )
        .replace("self.moe(h)", "self.block(h)")
    )
    path = tmp_path / "moe_through_map.py"
    path.write_text(source)
    graph = _capture(path)
    calls = [n.params["call"] for n in graph.nodes if n.kind == "aten" and n.params.get("syncs")]
    assert calls == ["self.get_submodule('block')({0})"]
    _computes_what_the_model_does(graph, path)


def _computes_what_the_model_does(graph: Graph, path: Path) -> None:
    """The captured graph, its PyTorch calls included, against the model on one input."""
    mod = import_path(path, path.stem)
    torch.manual_seed(0)
    model = mod.Model().eval()
    x = torch.randn(64, 32)
    with torch.no_grad():
        (got,) = run_graph(graph, model, [x])
        torch.testing.assert_close(got, model(x), rtol=1e-5, atol=1e-5)


def test_a_data_dependent_module_too_large_to_run_on_the_cpu_is_refused_with_both_reasons(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Its output shapes come from a CPU copy; past the size limit the model is refused, and the
    message says where the trace stopped and why the module could not be a PyTorch call."""
    from stitch_lsp.compiler.worker import opaque_modules

    monkeypatch.setattr(opaque_modules, "MAX_CPU_BYTES", 1024)
    path = tmp_path / "data_dependent_moe_big.py"
    path.write_text(DATA_DEPENDENT_MOE)
    with pytest.raises(Unsupported) as err:
        _capture(path)
    message = str(err.value)
    assert "aten.bincount" in message  # where the trace stopped
    assert "cannot run as a PyTorch call" in message and "too large to run on the CPU" in message
