"""The partitioner and index math, on hand-built IR graphs (no torch needed)."""

from __future__ import annotations

import pytest

from stitch_lsp.compiler.codegen import bcast_offset
from stitch_lsp.compiler.ir import Const, Graph, Unsupported, Use
from stitch_lsp.compiler.partition import Group, layout_of, partition


def _linear_graph() -> tuple[Graph, Use]:
    g = Graph()
    x = g.add_leaf("input", "x", (8, 16))
    w = g.add_leaf("param", "self.fc.weight", (32, 16))
    mm = g.add("gemm", "gemm", [Use(x.vid, (8, 16)), Use(w.vid, (16, 32), True)], (8, 32))
    return g, Use(mm.vid, (8, 32))


def test_gemm_then_elementwise_chain_is_one_kernel() -> None:
    g, y = _linear_graph()
    b = g.add_leaf("param", "self.fc.bias", (32,))
    a = g.add("ew", "add", [y, Use(b.vid, (32,))], (8, 32))
    r = g.add("ew", "relu", [Use(a.vid, (8, 32))], (8, 32))
    m = g.add("ew", "mul", [Use(r.vid, (8, 32)), Const(0.5)], (8, 32))
    g.outputs.append(Use(m.vid, (8, 32)))
    groups = partition(g)
    assert [gr.kind for gr in groups] == ["gemm", "pointwise"]
    assert [n.fn for n in groups[1].nodes] == ["add", "relu", "mul"]
    assert groups[0].outputs == [y.vid]  # the GEMM result is read by the kernel
    assert groups[1].outputs == [m.vid]  # intermediates stay in registers


def test_softmax_is_one_reduction_group() -> None:
    g, y = _linear_graph()
    mx = g.add("reduce", "softmax", [y], (8, 1), axes=(1,), field="max")
    se = g.add("reduce", "softmax", [y], (8, 1), axes=(1,), field="sumexp")
    sh = g.add("ew", "sub", [y, Use(mx.vid, (8, 1))], (8, 32))
    ex = g.add("ew", "exp", [Use(sh.vid, (8, 32))], (8, 32))
    out = g.add("ew", "div", [Use(ex.vid, (8, 32)), Use(se.vid, (8, 1))], (8, 32))
    g.outputs.append(Use(out.vid, (8, 32)))
    groups = partition(g)
    assert [gr.kind for gr in groups] == ["gemm", "reduction"]
    red = groups[1]
    assert red.layout is not None and red.layout.describe() == "row 8x32"
    assert red.passes == 1
    assert red.space[out.vid] == "full" and red.space[mx.vid] == "red"


def test_reduced_value_then_scalar_math_stays_in_group() -> None:
    g, y = _linear_graph()
    s = g.add("reduce", "sum", [y], (8, 1), axes=(1,), field="sum")
    m = g.add("ew", "mul", [Use(s.vid, (8, 1)), Const(1.5)], (8, 1))
    g.outputs.append(Use(m.vid, (8, 1)))
    groups = partition(g)
    assert len(groups) == 2
    assert groups[1].space[m.vid] == "red"
    assert groups[1].outputs == [m.vid]


def test_second_reduction_with_another_layout_starts_a_new_group() -> None:
    g = Graph()
    x = g.add_leaf("input", "x", (2, 6, 5, 7))
    mn = g.add("reduce", "min", [Use(x.vid, (2, 6, 5, 7))], (2, 6, 1, 7), axes=(2,), field="min")
    v = Use(mn.vid, (2, 6, 7))
    sm = g.add("reduce", "sum", [v], (2, 1, 7), axes=(1,), field="sum")
    g.outputs.append(Use(sm.vid, (2, 7)))
    groups = partition(g)
    assert [gr.kind for gr in groups] == ["reduction", "reduction"]
    assert groups[0].outputs == [mn.vid]  # materialised for the next group
    assert groups[0].layout is not None and groups[0].layout.kind == "tile"


def test_two_level_reduction_needs_two_passes() -> None:
    g = Graph()
    x = g.add_leaf("input", "x", (4, 10))
    xu = Use(x.vid, (4, 10))
    mean = g.add("reduce", "sum", [xu], (4, 1), axes=(1,), field="sum")
    c = g.add("ew", "sub", [xu, Use(mean.vid, (4, 1))], (4, 10))
    sq = g.add("ew", "square", [Use(c.vid, (4, 10))], (4, 10))
    var = g.add("reduce", "sum", [Use(sq.vid, (4, 10))], (4, 1), axes=(1,), field="sum")
    g.outputs.append(Use(var.vid, (4, 1)))
    (grp,) = partition(g)
    assert grp.passes == 2


def test_elementwise_of_another_size_splits() -> None:
    g = Graph()
    x = g.add_leaf("input", "x", (4, 10))
    a = g.add("ew", "relu", [Use(x.vid, (4, 10))], (4, 10))
    p = g.add_leaf("param", "self.p", (3,))
    b = g.add("ew", "mul", [Use(p.vid, (3,)), Const(2.0)], (3,))
    g.outputs += [Use(a.vid, (4, 10)), Use(b.vid, (3,))]
    groups = partition(g)
    assert len(groups) == 2


@pytest.mark.parametrize(
    ("shape", "axes", "kind", "dims"),
    [
        ((8, 32), (1,), "row", (8, 32, 1)),
        ((2, 3, 4, 5), (2, 3), "row", (6, 20, 1)),
        ((64, 70), (0,), "tile", (1, 64, 70)),
        ((2, 6, 5, 7), (2,), "tile", (12, 5, 7)),
        ((5, 6, 9, 10), (0, 2, 3), "chan", (5, 6, 90)),
        ((1, 6, 1, 7), (3,), "row", (6, 7, 1)),
        ((20,), (0,), "row", (1, 20, 1)),
    ],
)
def test_layouts(shape, axes, kind, dims) -> None:  # type: ignore[no-untyped-def]
    lay = layout_of(shape, axes)
    assert (lay.kind, lay.dims) == (kind, dims)


def test_unsupported_layout() -> None:
    with pytest.raises(Unsupported):
        layout_of((2, 3, 4, 5), (0, 2))  # R K R K
    with pytest.raises(Unsupported):
        layout_of((1, 4, 1), (0, 2))  # only size-1 dims reduced


def test_broadcast_offsets() -> None:
    assert bcast_offset("f", (8, 32), (8, 32)) == ("f", True)
    assert bcast_offset("f", (8, 32), (32,)) == ("(f % 32)", False)
    assert bcast_offset("f", (4, 6, 5, 5), (6, 1, 1)) == ("((f / 25) % 6)", False)
    assert bcast_offset("f", (4, 6, 5, 5), (4, 1, 1, 1)) == ("(f / 150)", False)
    assert bcast_offset("f", (8, 32), (1,)) == ("0", False)
    assert bcast_offset("f", (4, 6, 5), (4, 1, 5)) == ("(f / 30) * 5 + (f % 5)", False)
    with pytest.raises(Unsupported):
        bcast_offset("f", (8, 32), (16,))


def _linear_bias_graph(tail: list[str]) -> tuple[Graph, list[int]]:
    g, y = _linear_graph()
    b = g.add_leaf("param", "self.fc.bias", (32,))
    cur = g.add("ew", "add", [y, Use(b.vid, (32,))], (8, 32))
    vids = [cur.vid]
    for fn in tail:
        cur = g.add("ew", fn, [Use(cur.vid, (8, 32))], (8, 32))
        vids.append(cur.vid)
    g.outputs.append(Use(cur.vid, (8, 32)))
    return g, vids


def test_bias_and_relu_fold_into_the_gemm_epilogue() -> None:
    from stitch_lsp.compiler.partition import fold_gemm_epilogues

    g, vids = _linear_bias_graph(["relu"])
    groups = fold_gemm_epilogues(g, partition(g))
    assert [gr.kind for gr in groups] == ["gemm"]
    mm = groups[0].nodes[0]
    assert mm.params["epilogue"] == "relu_bias" and len(mm.args) == 3
    assert mm.vid == vids[-1] and groups[0].outputs == [vids[-1]]


def test_bias_folds_and_the_rest_stays_fused() -> None:
    from stitch_lsp.compiler.partition import fold_gemm_epilogues

    g, _ = _linear_bias_graph(["gelu", "tanh"])
    groups = fold_gemm_epilogues(g, partition(g))
    assert [gr.kind for gr in groups] == ["gemm", "pointwise"]
    assert groups[0].nodes[0].params["epilogue"] == "bias"
    assert [n.fn for n in groups[1].nodes] == ["identity", "gelu", "tanh"]


def test_no_fold_when_the_gemm_output_is_used_twice() -> None:
    from stitch_lsp.compiler.partition import fold_gemm_epilogues

    g, y = _linear_graph()
    b = g.add_leaf("param", "self.fc.bias", (32,))
    a = g.add("ew", "add", [y, Use(b.vid, (32,))], (8, 32))
    m = g.add("ew", "mul", [Use(a.vid, (8, 32)), y], (8, 32))
    g.outputs.append(Use(m.vid, (8, 32)))
    groups = fold_gemm_epilogues(g, partition(g))
    assert "epilogue" not in groups[0].nodes[0].params


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_half_precision_bias_folds_into_the_epilogue_in_its_own_type(dtype: str) -> None:
    """A bf16/fp16 Linear's bias runs in the cuBLASLt epilogue in that type (one rounding, as
    eager's addmm), and the launcher builds its plan for that type."""
    from stitch_lsp.compiler.codegen import Codegen
    from stitch_lsp.compiler.partition import fold_gemm_epilogues

    g = Graph()
    x = g.add_leaf("input", "x", (8, 16), dtype)
    w = g.add_leaf("param", "self.fc.weight", (32, 16), dtype)
    b = g.add_leaf("param", "self.fc.bias", (32,), dtype)
    mm = g.add(
        "gemm", "gemm", [Use(x.vid, (8, 16)), Use(w.vid, (16, 32), True)], (8, 32), dtype=dtype
    )
    add = g.add("ew", "add", [Use(mm.vid, (8, 32)), Use(b.vid, (32,))], (8, 32), dtype=dtype)
    g.outputs.append(Use(add.vid, (8, 32)))
    groups = fold_gemm_epilogues(g, partition(g))
    assert [gr.kind for gr in groups] == ["gemm"]
    assert groups[0].nodes[0].params["epilogue"] == "bias"
    src = Codegen(g, groups).cuda_source()
    blas = {"bfloat16": "CUDA_R_16BF", "float16": "CUDA_R_16F"}[dtype]
    assert f"stream, {blas});" in src and "bias on cuBLASLt" in src


def test_a_float32_bias_on_a_half_precision_gemm_stays_apart() -> None:
    from stitch_lsp.compiler.partition import fold_gemm_epilogues

    g = Graph()
    x = g.add_leaf("input", "x", (8, 16), "bfloat16")
    w = g.add_leaf("param", "self.fc.weight", (32, 16), "bfloat16")
    b = g.add_leaf("param", "self.fc.bias", (32,))
    mm = g.add(
        "gemm", "gemm", [Use(x.vid, (8, 16)), Use(w.vid, (16, 32), True)], (8, 32),
        dtype="bfloat16",
    )  # fmt: skip
    add = g.add("ew", "add", [Use(mm.vid, (8, 32)), Use(b.vid, (32,))], (8, 32))
    g.outputs.append(Use(add.vid, (8, 32)))
    groups = fold_gemm_epilogues(g, partition(g))
    assert "epilogue" not in groups[0].nodes[0].params


def _swiglu_graph(between: str) -> Graph:
    """silu(x @ Wg^T) * (x @ Wu^T), with `between` (a GEMM or a PyTorch call) after the SiLU."""
    g = Graph()
    x = g.add_leaf("input", "x", (8, 16))
    wg = g.add_leaf("param", "self.gate.weight", (32, 16))
    wu = g.add_leaf("param", "self.up.weight", (32, 16))
    gate = g.add("gemm", "gemm", [Use(x.vid, (8, 16)), Use(wg.vid, (16, 32), True)], (8, 32))
    act = g.add("ew", "silu", [Use(gate.vid, (8, 32))], (8, 32))
    if between == "gemm":
        up = g.add("gemm", "gemm", [Use(x.vid, (8, 16)), Use(wu.vid, (16, 32), True)], (8, 32))
    else:
        up = g.add("aten", "index_copy_.default", [Use(x.vid, (8, 32))], (8, 32), call="{0}")
    out = g.add("ew", "mul", [Use(act.vid, (8, 32)), Use(up.vid, (8, 32))], (8, 32))
    g.outputs.append(Use(out.vid, (8, 32)))
    return g


def test_an_activation_moves_past_the_next_gemm_into_its_readers_kernel() -> None:
    groups = partition(_swiglu_graph("gemm"))
    assert [gr.kind for gr in groups] == ["gemm", "gemm", "pointwise"]
    assert [n.fn for n in groups[2].nodes] == ["silu", "mul"]


def test_an_activation_never_moves_past_a_pytorch_call() -> None:
    """A PyTorch call may write what the activation reads (a cache updated in place)."""
    groups = partition(_swiglu_graph("aten"))
    assert [gr.kind for gr in groups] == ["gemm", "pointwise", "aten", "pointwise"]


def test_a_gemm_bias_stays_by_its_gemm_for_the_epilogue() -> None:
    """A bias add read by one op after another GEMM is not moved: it folds into the epilogue."""
    from stitch_lsp.compiler.partition import fold_gemm_epilogues

    g = Graph()
    x = g.add_leaf("input", "x", (8, 16))
    w1 = g.add_leaf("param", "self.q.weight", (32, 16))
    w2 = g.add_leaf("param", "self.k.weight", (32, 16))
    b = g.add_leaf("param", "self.q.bias", (32,))
    q = g.add("gemm", "gemm", [Use(x.vid, (8, 16)), Use(w1.vid, (16, 32), True)], (8, 32))
    qb = g.add("ew", "add", [Use(q.vid, (8, 32)), Use(b.vid, (32,))], (8, 32))
    k = g.add("gemm", "gemm", [Use(x.vid, (8, 16)), Use(w2.vid, (16, 32), True)], (8, 32))
    out = g.add("ew", "mul", [Use(qb.vid, (8, 32)), Use(k.vid, (8, 32))], (8, 32))
    g.outputs.append(Use(out.vid, (8, 32)))
    groups = fold_gemm_epilogues(g, partition(g))
    assert [gr.kind for gr in groups] == ["gemm", "gemm", "pointwise"]
    assert groups[0].nodes[0].params["epilogue"] == "bias"


def test_pointwise_neighbours_combine_only_when_independent() -> None:
    """Two kernels share a launch when neither reads what the other writes; a reader of the
    first stays apart, and so does weight preparation (it leaves the per-call launches)."""
    from stitch_lsp.compiler.stages import combine_pointwise

    g = Graph()
    x = g.add_leaf("input", "x", (64,))
    y = g.add_leaf("input", "y", (48,))
    w = g.add_leaf("param", "self.w", (32,), path="w")
    a = g.add("ew", "tanh", [Use(x.vid, (64,))], (64,))
    b = g.add("ew", "exp", [Use(y.vid, (48,))], (48,))
    c = g.add("ew", "neg", [Use(a.vid, (64,))], (64,))
    d = g.add("ew", "exp", [Use(w.vid, (32,))], (32,))  # reads a parameter alone: prepared
    e = g.add("ew", "sin", [Use(x.vid, (64,))], (64,))
    f = g.add("ew", "add", [Use(d.vid, (32,)), Use(d.vid, (32,))], (32,))
    g.outputs = [Use(v.vid, v.shape) for v in (b, c, e, f)]
    groups = []
    for i, n in enumerate((a, b, c, d, e, f)):  # one kernel each, in this order
        groups.append(Group(i, "pointwise", [n], n.shape[0], {n.vid: "full"}, {n.vid: 0}))
        groups[-1].outputs = [n.vid]
    combined = combine_pointwise(g, groups)
    parts = [[n.fn for p in (gr.parts or [gr]) for n in p.nodes] for gr in combined]
    # tanh+exp share a launch; neg reads tanh, so it starts the next one; the parameter's exp
    # is weight preparation; sin and the add after it (an output, so per call) share one
    assert parts == [["tanh", "exp"], ["neg"], ["exp"], ["sin", "add"]]
