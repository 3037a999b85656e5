"""Capture, partition and generate in one call (runs inside the torch worker)."""

from __future__ import annotations

import time
from pathlib import Path

from stitch_lsp.candidate_header import HeaderError, relative_reference
from stitch_lsp.compiler.codegen import Codegen
from stitch_lsp.compiler.ir import Unsupported
from stitch_lsp.compiler.partition import Group
from stitch_lsp.compiler.program import candidate_source
from stitch_lsp.compiler.rewrites import Applied, apply_rewrites
from stitch_lsp.compiler.stages import plan_stages
from stitch_lsp.models.codegen import BuiltinCandidate, CompiledGroup


def _compiled_group(
    stage: int, g: Group, launcher: str | None, applied: list[Applied]
) -> CompiledGroup:
    if g.kind == "aten":
        return _fallback_group(stage, g)
    ops = [n.origin or n.fn for n in g.nodes + g.sinks]
    vids = {n.vid for n in g.nodes}
    lines = sorted({n.line for n in g.nodes + g.sinks if n.line is not None})
    library = {
        "gemm": "cuBLAS (FP32 compute)",
        "conv": "cuDNN through PyTorch",
        "rnn": "cuBLAS GEMMs (FP32 compute) + one fused gate kernel per time step",
    }.get(g.kind)
    epilogue = str(g.nodes[0].params.get("epilogue", "")) if g.kind == "gemm" else ""
    if epilogue:
        library = "cuBLASLt (FP32 compute, fused epilogue)"
        ops.append("bias (cuBLASLt epilogue)")
        if epilogue == "relu_bias":
            ops.append("relu (cuBLASLt epilogue)")
    return CompiledGroup(
        name=launcher or f"torch.nn.functional.{g.nodes[0].fn}",
        stage=stage,
        kind=g.kind,
        ops=list(dict.fromkeys(ops)),
        library=library,
        layout=g.layout.describe() if g.layout else None,
        lines=lines,
        rewrites=list(dict.fromkeys(a.name for a in applied if a.vids & vids)),
    )


def _fallback_group(stage: int, g: Group) -> CompiledGroup:
    """A stage of PyTorch fallbacks: each op with the ATen call it runs and why."""
    calls = [n for n in g.nodes if "[" not in n.fn]
    return CompiledGroup(
        name="PyTorch fallback: " + ", ".join(dict.fromkeys(f"aten.{n.fn}" for n in calls)),
        stage=stage,
        kind="aten",
        ops=list(dict.fromkeys(f"{n.origin or n.fn} [aten.{n.fn}]" for n in calls)),
        library="PyTorch (ATen fallback: not generated)",
        lines=sorted({n.line for n in calls if n.line is not None}),
    )


def with_rewrites(source: str, applied: list[Applied], notes: list[str] | None = None) -> str:
    """The candidate's docstring names the algebra it relies on and what capture simplified
    (`Graph.notes`), after its first line."""
    note: list[str] = []
    if applied:
        note += ["Algebra rewrites applied before partitioning (stitch_lsp.compiler.rewrites):"]
        note += [f"  - {a.describe()}" for a in applied]
    note += [f"Capture: {n}." for n in notes or []]
    if not note:
        return source
    first = source.index('"""')
    cut = source.index("\n\n", first) + 2
    return source[:cut] + "\n".join(note) + "\n\n" + source[cut:]


def _vendor_only(groups: list[Group]) -> bool:
    """Every op on cuBLAS, cuDNN or PyTorch with nothing fused into the vendor call: a program
    that only calls the library is not a CUDA implementation (a GEMM whose bias and ReLU run in
    its cuBLASLt epilogue is: that epilogue is the fusion)."""
    fused = any(n.params.get("epilogue") for g in groups if g.kind == "gemm" for n in g.nodes)
    return not fused and all(g.kind in ("conv", "gemm", "aten") for g in groups)


def _nothing_generated(groups: list[Group]) -> str:
    """Why a program of library calls only is refused, naming what would stay there."""
    if all(g.kind == "gemm" for g in groups):
        return (
            "nothing to generate: the module is a matrix product alone, which the builtin coder "
            "would only hand to cuBLAS (a candidate that only calls the library would not be a "
            "CUDA implementation)"
        )
    if all(g.kind == "conv" for g in groups):
        return (
            "nothing to generate: the module is a convolution alone, which stays on cuDNN "
            "(a candidate that only calls PyTorch would not be a CUDA implementation)"
        )
    stays = [
        f"{n.origin or n.fn} ({n.params.get('why') or 'no lowering'})"
        for g in groups
        if g.kind == "aten"
        for n in g.nodes
        if "[" not in n.fn
    ]
    return (
        "nothing to generate: every op would stay in cuBLAS, cuDNN or PyTorch, and a candidate "
        "that only calls them is not a CUDA implementation"
        + ("; PyTorch fallbacks: " + "; ".join(stays[:6]) if stays else "")
    )


def header_for(reference: Path, candidate_dir: Path | None) -> str:
    if candidate_dir is None:
        return reference.name
    return relative_reference(reference, candidate_dir)


def generate(reference: Path, header: str) -> BuiltinCandidate:
    from stitch_lsp.compiler.worker.capture import capture  # torch

    start = time.perf_counter()
    summary = ""
    try:
        graph = capture(reference)
        applied = apply_rewrites(graph)
        summary = graph.summary()
        groups = plan_stages(graph)
        if _vendor_only(groups):
            raise Unsupported(_nothing_generated(groups))
        cg = Codegen(graph, groups)
        cuda = cg.cuda_source()
        source = candidate_source(graph, groups, cg, cuda, reference.read_text(), header)
        source = with_rewrites(source, applied, graph.notes)
    except (Unsupported, HeaderError) as exc:
        return BuiltinCandidate(
            handled=False,
            reason=str(exc),
            graph_summary=summary,
            seconds=time.perf_counter() - start,
        )
    names = {k.group.gid: k.name for k in cg.kernels}
    return BuiltinCandidate(
        handled=True,
        source=source,
        groups=[_compiled_group(i, g, names.get(g.gid), applied) for i, g in enumerate(groups)],
        rewrites=[a.describe() for a in applied],
        graph_summary=summary,
        cuda_source=cuda,
        seconds=time.perf_counter() - start,
    )
