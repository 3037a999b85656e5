"""The planner's analysis worker (`stitch_lsp.agents.worker.main`): a `PlannerRequest` in, a
`ReferenceAnalysis` out.

Runs where torch is (never inside the language server). It traces the reference `Model` with
torch.fx on fake tensors (so KernelBench's multi-GB sizes cost nothing), counts FLOPs and bytes
per node, and computes the roofline floor on the target GPU. With `profile` set and a CUDA GPU it
also runs the real model: eager time, time per fx node (CUDA events) and the top kernels from
torch.profiler. The reference's own prints go to stderr.
"""

from __future__ import annotations

import contextlib
import math
import operator
import runpy
import statistics
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any, Literal

from stitch_lsp.agents.hardware import default_target, spec_for
from stitch_lsp.compiler.ops import is_view
from stitch_lsp.models.agents import (
    HardwareSpec,
    KernelTime,
    OpCost,
    PlannerRequest,
    ReferenceAnalysis,
    TensorMeta,
)
from stitch_lsp.runtime.cuda_timing import median_ms
from stitch_lsp.workers.entry import read_request

_MAX_PROFILE_BYTES = 24 * 2**30


def _op_name(node: Any, root: Any) -> str:
    if node.op == "call_module":
        return type(root.get_submodule(node.target)).__name__
    target = node.target
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", str(target)).lstrip("_")


def _tensors(value: Any) -> list[Any]:
    import torch

    out: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (list, tuple)):
            stack.extend(v)
        elif isinstance(v, dict):
            stack.extend(v.values())
    return out


def _meta(t: Any) -> TensorMeta:
    return TensorMeta(shape=[int(s) for s in t.shape], dtype=str(t.dtype).removeprefix("torch."))


def _nbytes(t: Any) -> float:
    return float(t.numel() * t.element_size())


def _floor(
    flops: float, nbytes: float, hw: HardwareSpec
) -> tuple[float, Literal["memory", "compute"]]:
    compute = flops / (hw.fp32_tflops * 1e12)
    memory = nbytes / (hw.bandwidth_tb_s * 1e12)
    return max(compute, memory) * 1e3, "compute" if compute > memory else "memory"


def _hardware() -> HardwareSpec:
    import torch

    if not torch.cuda.is_available():
        return default_target()
    p = torch.cuda.get_device_properties(0)
    return spec_for(
        p.name,
        present=True,
        compute_capability=f"{p.major}.{p.minor}",
        sm_count=p.multi_processor_count,
        memory_gib=round(p.total_memory / 2**30, 1),
    )


def _load(path: Path) -> dict[str, Any]:
    with contextlib.redirect_stdout(sys.stderr):
        ns = runpy.run_path(str(path), run_name="__stitch_reference__")
    missing = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in ns]
    if missing:
        raise SystemExit(
            f"{path}: not a KernelBench-format reference (missing {', '.join(missing)})"
        )
    return ns


def analyze(path: Path, *, profile: bool) -> ReferenceAnalysis:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    ns = _load(path)
    hw = _hardware()
    notes: list[str] = []
    with FakeTensorMode(allow_non_fake_inputs=True) as fake:
        torch.manual_seed(42)
        model = ns["Model"](*ns["get_init_inputs"]())
        inputs = list(ns["get_inputs"]())
    param_bytes = sum(_nbytes(p) for p in model.parameters()) + sum(
        _nbytes(b) for b in model.buffers()
    )
    in_meta = [_meta(t) for t in _tensors(inputs)]
    in_bytes = sum(_nbytes(t) for t in _tensors(inputs))
    metas: dict[str, TensorMeta | None] = {}
    try:
        gm = _trace(model)
        ops, outputs = _fx_costs(gm, inputs, fake, hw, path, metas)
        method = "fx"
    except Exception as exc:  # data-dependent control flow and the like
        notes.append(
            f"torch.fx could not trace the model ({type(exc).__name__}: {exc}); "
            "per-module costs from hooks instead"
        )
        gm = None
        ops, outputs = _hook_costs(model, inputs, fake, hw)
        method = "module-hooks"
    out_bytes = sum(_nbytes(t) for t in outputs)
    total_flops = sum(o.flops for o in ops)
    fused_bytes = in_bytes + param_bytes + out_bytes
    analysis = ReferenceAnalysis(
        module=type(model).__name__,
        graph_method=method,
        inputs=in_meta,
        outputs=[_meta(t) for t in outputs],
        parameter_bytes=param_bytes,
        ops=ops,
        total_flops=total_flops,
        unfused_bytes=sum(o.bytes for o in ops),
        fused_bytes=fused_bytes,
        fused_floor_ms=_floor(total_flops, fused_bytes, hw)[0],
        unfused_floor_ms=sum(o.floor_ms for o in ops),
        hardware=hw,
        notes=notes,
    )
    if gm is not None:
        _scaffold(gm, path, ns, fake, inputs, analysis, metas)
    analysis.notes.append(
        "FLOPs: matmul/conv from torch's flop counter; other ops one FLOP per element of "
        "their largest operand. "
        "Floors use FP32 without tensor cores."
    )
    if profile:
        if not hw.present:
            analysis.notes.append("no CUDA GPU: the reference was not timed")
        elif fused_bytes + in_bytes > _MAX_PROFILE_BYTES:
            analysis.notes.append("the reference needs too much memory to time it here")
        else:
            _profile(ns, gm, analysis)
    return analysis


def _trace(model: Any) -> Any:
    """torch.fx's symbolic trace, keeping each node's stack (its source line)."""
    import torch

    tracer = torch.fx.Tracer()
    tracer.record_stack_traces = True
    graph = tracer.trace(model)
    return torch.fx.GraphModule(tracer.root, graph)


def _scaffold(
    gm: Any,
    path: Path,
    ns: dict[str, Any],
    fake: Any,
    inputs: list[Any],
    analysis: ReferenceAnalysis,
    metas: dict[str, TensorMeta | None],
) -> None:
    """The flat all-PyTorch ModelNew partial programs start from, checked before it is used."""
    from stitch_lsp.agents.worker import scaffold

    lines = {op.node: op.line for op in analysis.ops}
    try:
        built = scaffold.build(gm, path.read_text(encoding="utf-8"), inputs, lines, metas)
        scaffold.validate(built, ns, fake)
    except scaffold.ScaffoldError as exc:
        analysis.notes.append(f"no forward scaffold for partial programs: {exc}"[:300])
        return
    analysis.scaffold = built


def _fx_costs(
    gm: Any,
    inputs: list[Any],
    fake: Any,
    hw: HardwareSpec,
    path: Path,
    metas: dict[str, TensorMeta | None],
) -> tuple[list[OpCost], list[Any]]:
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from stitch_lsp.agents.worker.scaffold import source_line, tensor_meta

    ops: list[OpCost] = []
    outputs: list[Any] = []

    class Costing(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            result = self._run(n)
            metas[n.name] = tensor_meta(result)
            if ops and ops[-1].node == n.name:
                ops[-1].line = source_line(n, path)
            return result

        def _run(self, n: Any) -> Any:
            if n.op in {"placeholder", "get_attr"}:
                return super().run_node(n)
            if n.op == "output":
                result = super().run_node(n)
                outputs.extend(_tensors(result))
                return result
            ins = _tensors([self.env.get(a) for a in n.all_input_nodes])
            with FlopCounterMode(display=False) as counter:
                result = super().run_node(n)
            name = _op_name(n, gm)
            outs = _tensors(result)
            if is_view(name) or n.target in {operator.getitem, getattr}:
                ops.append(
                    OpCost(node=n.name, op=name, kind=n.op, outputs=[_meta(t) for t in outs])
                )
                return result
            elements = max([t.numel() for t in outs + ins] or [0])
            flops = float(counter.get_total_flops()) or float(elements)
            nbytes = sum(_nbytes(t) for t in ins) + sum(_nbytes(t) for t in outs)
            if n.op == "call_module":
                sub = gm.get_submodule(n.target)
                nbytes += sum(_nbytes(p) for p in sub.parameters())
            floor_ms, bound = _floor(flops, nbytes, hw)
            ops.append(
                OpCost(
                    node=n.name,
                    op=name,
                    kind=n.op,
                    outputs=[_meta(t) for t in outs],
                    flops=flops,
                    bytes=nbytes,
                    floor_ms=floor_ms,
                    bound=bound,
                )
            )
            return result

    with fake:
        Costing(gm).run(*inputs)
    return ops, outputs


def _hook_costs(
    model: Any, inputs: list[Any], fake: Any, hw: HardwareSpec
) -> tuple[list[OpCost], list[Any]]:
    from torch.utils.flop_counter import FlopCounterMode

    ops: list[OpCost] = []
    handles = []
    for mname, mod in model.named_modules():
        if mname and not list(mod.children()):

            def hook(m: Any, args: Any, out: Any, mname: str = mname) -> None:
                ins, outs = _tensors(args), _tensors(out)
                nbytes = sum(map(_nbytes, ins)) + sum(map(_nbytes, outs))
                nbytes += sum(_nbytes(p) for p in m.parameters())
                ops.append(
                    OpCost(
                        node=mname,
                        op=type(m).__name__,
                        kind="call_module",
                        outputs=[_meta(t) for t in outs],
                        bytes=nbytes,
                    )
                )

            handles.append(mod.register_forward_hook(hook))
    with fake, FlopCounterMode(display=False) as counter:
        result = model(*inputs)
    for h in handles:
        h.remove()
    per_module = counter.get_flop_counts()
    for op in ops:
        key = f"{type(model).__name__}.{op.node}"
        flops = float(sum(per_module.get(key, {}).values()))
        op.flops = flops or float(sum(math.prod(m.shape) for m in op.outputs))
        op.floor_ms, op.bound = _floor(op.flops, op.bytes, hw)
    rest = float(counter.get_total_flops()) - sum(o.flops for o in ops)
    if rest > 0:  # matmuls written inline in forward(), outside any leaf module
        floor_ms, bound = _floor(rest, 0.0, hw)
        ops.append(
            OpCost(
                node="forward",
                op="inline ops",
                kind="call_function",
                flops=rest,
                floor_ms=floor_ms,
                bound=bound,
            )
        )
    return ops, _tensors(result)


def _profile(ns: dict[str, Any], gm: Any, analysis: ReferenceAnalysis) -> None:
    """Time the real reference on the GPU: whole forward, each fx node, and the top kernels."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(42)
    with torch.device("cuda"):  # build weights and inputs on the GPU: multi-GB inputs in seconds
        model = ns["Model"](*ns["get_init_inputs"]()).cuda()
        inputs = [t.cuda() if isinstance(t, torch.Tensor) else t for t in ns["get_inputs"]()]
    with torch.no_grad():
        for _ in range(3):
            model(*inputs)
        torch.cuda.synchronize()
        analysis.eager_ms = median_ms(lambda: model(*inputs), 10)
        if gm is not None:
            _time_nodes(gm, model, inputs, analysis)
        with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(3):
                model(*inputs)
            torch.cuda.synchronize()
    kernels = []
    for evt in prof.key_averages():
        device_us = getattr(evt, "device_time_total", None) or getattr(evt, "cuda_time_total", 0)
        if device_us and evt.device_type == torch.autograd.DeviceType.CUDA:
            kernels.append(
                KernelTime(name=evt.key[:200], device_ms=device_us / 3e3, calls=evt.count // 3)
            )
    analysis.kernels = sorted(kernels, key=lambda k: -k.device_ms)[:10]
    _timeline(model, inputs, analysis)


def _timeline(model: Any, inputs: list[Any], analysis: ReferenceAnalysis) -> None:
    """The system-level view (kernel count, busy fraction, gaps, host time) the Verifier also
    records, from a few more forwards outside the timed ones."""
    from stitch_lsp.verify.timeline import RecordingError, summarise
    from stitch_lsp.verify.worker import activity

    try:
        calls = activity.record(model, inputs, calls=3)
        analysis.timeline = summarise(calls, activity.host_ms(model, inputs))
    except (RecordingError, RuntimeError, AttributeError) as exc:
        analysis.notes.append(f"no timeline: {type(exc).__name__}: {exc}"[:300])


def _time_nodes(gm: Any, model: Any, inputs: list[Any], analysis: ReferenceAnalysis) -> None:
    import torch

    gm_real = torch.fx.GraphModule(model, gm.graph)
    samples: dict[str, list[float]] = {}

    class Timing(torch.fx.Interpreter):
        def run_node(self, n: Any) -> Any:
            if n.op in {"placeholder", "get_attr", "output"}:
                return super().run_node(n)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            result = super().run_node(n)
            end.record()
            end.synchronize()
            samples.setdefault(n.name, []).append(start.elapsed_time(end))
            return result

    for _ in range(5):
        Timing(gm_real).run(*inputs)
    for op in analysis.ops:
        if op.node in samples:
            op.measured_ms = statistics.median(samples[op.node][1:] or samples[op.node])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    request, out = read_request(args, PlannerRequest, "stitch_lsp.agents.worker.main")
    warnings.filterwarnings("ignore")
    try:
        analysis = analyze(Path(request.reference), profile=request.profile)
    except SystemExit:
        raise
    except BaseException as exc:
        traceback.print_exc(file=sys.stderr)
        print(f"planner analysis failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    out.save(analysis)
    return 0
