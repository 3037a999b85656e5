"""Write the candidate's Python: the reference's constructor, and a forward that calls the kernels.

ModelNew copies Model's constructor verbatim (and the module-level names it uses), so seeding
gives both the same weights, and the parameters keep their names. Its forward allocates outputs,
runs convolutions through PyTorch (cuDNN) when there are any, and calls the generated launchers
with raw pointers on the current stream. Its only tensor math of its own is the ops the coder
cannot generate, each run as the ATen call the trace recorded and named in the docstring.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field

from stitch_lsp.candidate_header import header_line
from stitch_lsp.compiler.attr_path import (
    TENSOR_AT_SOURCE,
    comment_text,
    display_path,
    is_identifier,
)
from stitch_lsp.compiler.codegen import Codegen, GroupKernel
from stitch_lsp.compiler.direct_conv import is_direct
from stitch_lsp.compiler.ir import Graph, Node, Unsupported, Use, float_source, numel
from stitch_lsp.compiler.layout import strides_of
from stitch_lsp.compiler.memplan import Buffer, Placement, plan
from stitch_lsp.compiler.partition import Group, reads
from stitch_lsp.compiler.stages import weight_only


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _defined(stmt: ast.stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {stmt.name}
    if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return set()


def model_parts(reference_source: str) -> tuple[list[str], str]:
    """(module-level statements ModelNew needs, Model's class body without forward)."""
    tree = ast.parse(reference_source)
    lines = reference_source.splitlines()

    def text(node: ast.AST) -> str:
        return "\n".join(lines[node.lineno - 1 : node.end_lineno])  # type: ignore[attr-defined]

    model = next((s for s in tree.body if isinstance(s, ast.ClassDef) and s.name == "Model"), None)
    if model is None:
        raise Unsupported("the reference defines no class Model")
    members = [
        s for s in model.body if not (isinstance(s, ast.FunctionDef) and s.name == "forward")
    ]
    members = [
        s
        for s in members
        if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))  # docstring
    ]
    needed = set().union(*(_names(s) for s in members)) if members else set()
    for s in members:
        if isinstance(s, ast.FunctionDef):
            needed -= {a.arg for a in ast.walk(s.args) if isinstance(a, ast.arg)}
    keep: list[str] = []
    skip = {"Model", "get_inputs", "get_init_inputs"}
    chosen: list[ast.stmt] = []
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            chosen.append(stmt)
    changed = True
    extra: list[ast.stmt] = []
    while changed:
        changed = False
        for stmt in tree.body:
            if stmt in extra or isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            names = _defined(stmt)
            if names & skip or not (names & needed):
                continue
            extra.append(stmt)
            needed |= _names(stmt)
            changed = True
    extra.sort(key=lambda s: s.lineno)
    keep = [text(s) for s in chosen] + ["\n" + text(s) for s in extra]
    body = "\n\n".join(text(s) for s in members)
    body = body.replace("super(Model, self).__init__()", "super().__init__()")
    indent = min((len(ln) - len(ln.lstrip()) for ln in body.splitlines() if ln.strip()), default=4)
    body = "\n".join(("    " + ln[indent:]) if ln.strip() else "" for ln in body.splitlines())
    return keep, body


def _py_shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


@dataclass
class Stage:
    """One step of the forward, in order: a library call or one of our launchers."""

    index: int
    group: Group
    lines: list[str] = field(default_factory=list)
    prepares: bool = False  # weight preparation: hoisted out of the per-call launches


@dataclass
class Program:
    """The forward as stages, plus the arena plan of its intermediate buffers."""

    stages: list[Stage]
    placement: Placement
    arena_layout: list[tuple[int, tuple[int, ...], str]]  # (offset, shape, dtype) per buffer
    forward: str
    chooses: bool = False  # an attention stage runs ours or sdpa, timed (runtime.choice)

    @property
    def preparation(self) -> list[Stage]:
        return [st for st in self.stages if st.prepares]


def _buffers(
    graph: Graph, groups: list[Group], cg: Codegen, prep: set[int]
) -> tuple[list[Buffer], dict]:
    """Every kernel output that is not a graph output, and every workspace, with its lifetime.
    Weight preparation's buffers live for the whole forward and between calls (the launches
    read what an earlier call prepared), so no other buffer shares their bytes."""
    out_vids = {u.vid for u in graph.outputs}
    whole = len(groups)
    kernels = {k.group.gid: k for k in cg.kernels}
    last_use: dict[int, int] = {}
    for i, g in enumerate(groups):
        for n in g.nodes + g.sinks:
            # Through the values a kernel recomputes where it reads them (an add that only a
            # cat reads is computed in the cat's kernel): their operands are read here too.
            for u in reads(graph, n, graph.recomputed):
                last_use[u.vid] = i
    buffers: list[Buffer] = []
    meta: dict[str, tuple[tuple[int, ...], str]] = {}
    for i, g in enumerate(groups):
        k = kernels.get(g.gid)
        if k is None:
            continue
        pinned = i in prep
        for a in k.args:
            if a.role == "ws":
                key = f"ws{g.gid}"
                buffers.append(Buffer(key, a.nbytes, 0 if pinned else i, whole if pinned else i))
                meta[key] = ((max(a.nbytes, 1),), "torch.uint8")
            elif a.role == "out" and a.vid not in out_vids:
                key = f"t{a.vid}"
                shape = graph.shape_of(a.vid)
                dtype, size = _torch_dtype(a.ctype)
                nbytes = numel(shape) * size
                last = whole if pinned else max(i, last_use.get(a.vid, i))
                buffers.append(Buffer(key, nbytes, 0 if pinned else i, last))
                meta[key] = (tuple(shape), dtype)
    return buffers, meta


_TORCH_DTYPES = {
    "long long": ("torch.int64", 8),
    "__nv_bfloat16": ("torch.bfloat16", 2),
    "__half": ("torch.float16", 2),
    "float": ("torch.float32", 4),
}


def _torch_dtype(ctype: str) -> tuple[str, int]:
    """(torch dtype, bytes per element) of a kernel output pointer type."""
    base = ctype.replace("__restrict__", "").replace("*", "").replace("const", "").strip()
    return _TORCH_DTYPES[base]


def leaf_paths(graph: Graph) -> list[str]:
    """The dotted paths of the parameters and buffers the kernels read, in `leaves[i]` order."""
    paths = []
    for leaf in graph.leaves.values():
        if leaf.kind in ("param", "buffer"):
            if leaf.path is None:
                raise Unsupported(f"{leaf.expr}: no attribute path to reach it by")
            paths.append(leaf.path)
    return paths


def _plain_literal(value: object) -> bool:
    """A default whose repr is a Python literal of the same value (no object's own __repr__)."""
    if value is None or type(value) in (bool, int, str):
        return True
    if type(value) is float:
        return True  # inf and nan are spelled float('inf') by _source
    if type(value) is tuple:
        return all(_plain_literal(v) for v in value)  # type: ignore[union-attr]
    return False


def _check_signature(graph: Graph) -> None:
    """forward's arguments go into the generated signature: identifiers, literal defaults."""
    for name in [*graph.input_names, *graph.defaulted]:
        if not is_identifier(name):
            raise Unsupported(f"forward argument {comment_text(repr(name))} is not an identifier")
    for name, value in graph.defaulted.items():
        if not _plain_literal(value):
            raise Unsupported(
                f"forward argument {name} defaults to a {comment_text(type(value).__name__)}; "
                "the builtin coder handles defaults that are None, numbers, strings or tuples"
            )


def _device(graph: Graph) -> str:
    """The device the forward runs on: its first input's."""
    first = graph.input_names[0] if graph.input_names else None
    return f"{first}.device" if first else "torch.device('cuda')"


def _input_checks(graph: Graph) -> list[str]:
    """The candidate is specialised to one problem: other defaults or shapes are refused."""
    lines = []
    for name, value in graph.defaulted.items():
        why = f"this ModelNew was generated for {name}={_source(value)}"
        # None and booleans by identity; other values by repr, which tells inf, nan and -0.0
        # apart, and avoids `is` with a literal (a SyntaxWarning, and False for a float default)
        test = (
            f"{name} is not {value!r}"
            if value is None or isinstance(value, bool)
            else f"repr({name}) != {repr(value)!r}"
        )
        lines.append(f"        if {test}:\n            raise ValueError({why!r})")
    for leaf in graph.leaves.values():
        if leaf.kind != "input":
            continue
        lines.append(
            f"        if tuple({leaf.expr}.shape) != {_py_shape(leaf.shape)}:\n"
            f"            raise ValueError(\n"
            f'                f"{leaf.expr} has shape {{tuple({leaf.expr}.shape)}}; this "\n'
            f'                "ModelNew was generated for {_py_shape(leaf.shape)}: generate it "\n'
            f'                "again for new shapes"\n'
            f"            )"
        )
        # the kernels read the type they were generated for: a float mask passed for a bool
        # one (or float64 for float32) would be read as other bytes
        lines.append(
            f"        if {leaf.expr}.dtype != torch.{leaf.dtype}:\n"
            f"            raise TypeError(\n"
            f'                f"{leaf.expr} has dtype {{{leaf.expr}.dtype}}; this ModelNew was "\n'
            f'                "generated for torch.{leaf.dtype}: generate it again for new types"\n'
            f"            )"
        )
        lines.append(f"        {leaf.expr} = {leaf.expr}.contiguous()")
    return lines


def _training_checks(groups: list[Group]) -> list[str]:
    """Batch norms were generated in training mode (batch statistics): eval mode is refused."""
    bn_modes = sorted(
        {str(s.params["module"]) for g in groups for s in g.sinks if "module" in s.params}
    )
    lines = []
    for mod in bn_modes:
        why = (
            f"generated for {display_path(mod)} in training mode (batch statistics); "
            "generate again after .eval()"
        )
        lines.append(
            f"        if not self.get_submodule({mod!r}).training:\n"
            f"            raise RuntimeError({why!r})"
        )
    return lines


def preparation(graph: Graph, groups: list[Group], cg: Codegen) -> set[int]:
    """The stages that run as weight preparation (`stages.weight_only`), of those with a kernel."""
    return weight_only(graph, groups, {k.group.gid for k in cg.kernels})


_LEAF_INDEX = re.compile(r"leaves\[(\d+)\]")


def _source(value: object) -> str:
    """A default's value as source: `float('inf')` where repr writes an undefined `inf`."""
    if isinstance(value, float):
        return float_source(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(_source(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def _forward_head(graph: Graph, groups: list[Group], prepares: bool) -> list[str]:
    """forward itself: its checks, then the graph runner, under a device guard if needed."""
    defaults = [f"{name}={_source(value)}" for name, value in graph.defaulted.items()]
    sig = ", ".join(["self", *graph.input_names, *defaults])
    dev = _device(graph)
    names = ", ".join(graph.input_names)
    # weight preparation runs here, outside the graph the runner replays
    prepare = [f"self._stitch_prepare({dev})"] if prepares else []
    return [
        f"    def forward({sig}):",
        "        _load()",
        *_input_checks(graph),
        *_training_checks(groups),
        # The device guard costs microseconds before the first launch; enter it only when needed.
        f"        if {dev}.index != torch.cuda.current_device():",
        f"            with torch.cuda.device({dev}):",
        *(f"                {line}" for line in prepare),
        f"                return self._stitch_graph({names})",
        *(f"        {line}" for line in prepare),
        f"        return self._stitch_graph({names})",
        "",
    ]


def _prepare_method(stages: list[Stage], slots: bool) -> list[str]:
    """`_stitch_prepare`: the weight-preparation stages, run when what they read changed."""
    first, last = stages[0].index, stages[-1].index
    which = f"stage {first}" if first == last else f"stages {first}-{last}"
    used = sorted({int(m) for st in stages for m in _LEAF_INDEX.findall("\n".join(st.lines))})
    reads = ", ".join(f"leaves[{k}]" for k in used)
    lines = [
        "    def _stitch_prepare(self, dev):",
        f'        """Weight preparation ({which}): values derived from parameters alone, kept in',
        "        the arena between calls. They are computed again when a tensor they read is",
        "        replaced or written in place (its address or version counter changes), and on",
        "        every call an outer CUDA graph captures. Writes through `.data` bypass the",
        "        version counter, as they bypass autograd: after one, clear",
        '        `self._stitch_arena.prepared`."""',
        "        leaves = self._stitch_params()",
        "        arena = _arena(self)",
        f"        key = arena.weights_key({reads})",
        "        if arena.prepared.get(dev) == key:",
        "            return",
        "        lib = _load()",
        "        stream = torch.cuda.current_stream().cuda_stream",
    ]
    if slots:
        lines.append("        buf = arena.views(dev)")
    for st in stages:
        lines += ["        " + ln for ln in st.lines]
    lines += ["        arena.prepared[dev] = key", ""]
    return lines


def _changes_no_state(graph: Graph, groups: list[Group]) -> bool:
    """A forward that can run twice on the same inputs with nothing else changed: no stores
    into buffers (running statistics, a cache), no random draws, no PyTorch fallback (which may
    write or draw), no recurrent launcher."""
    if any(g.sinks or g.kind in ("aten", "rnn") for g in groups):
        return False
    return not any(leaf.kind == "factory" for leaf in graph.leaves.values())


def _runner_methods(graph: Graph, groups: list[Group], prep: set[int]) -> list[str]:
    """The methods forward relies on (parameter lookup, the runner's guard, .to() resets, the
    runner itself) and the head of `_launch`, which the stages' lines follow."""
    names = ", ".join(graph.input_names)
    # Stages per forward, for the runner's rule on when replay pays for its copies; recurrent
    # stages launch per time step, so for them the graph is always tried.
    per_call = len(groups) - len(prep)
    stages = None if any(g.kind == "rnn" for g in groups) else max(1, per_call)
    # a submodule run as PyTorch code (its forward depends on data, or changes its own
    # weights): it may sync with the host, which a CUDA graph cannot capture
    syncs = [n for g in groups for n in g.nodes if n.kind == "aten" and n.params.get("syncs")]
    plain = ""
    if syncs:
        why = f"{syncs[0].params.get('display')}: {syncs[0].params.get('why')}"
        plain = f", plain={why!r}"
    elif _changes_no_state(graph, groups):
        plain = ", timed=True"  # the runner may run it again to time replay against plain
    lines = [
        "    def _stitch_params(self):",
        '        """The parameters and buffers the kernels read, looked up once."""',
        '        leaves = self.__dict__.get("_stitch_leaves")',
        "        if leaves is None:",
        '            leaves = self.__dict__["_stitch_leaves"] = [',
        "                _tensor_at(self, path) for path in _LEAF_PATHS",
        "            ]",
        "        return leaves",
        "",
        "    def _stitch_guard(self):",
        '        """What a captured graph reads besides its inputs: the parameters\' addresses."""',
        "        return tuple(t.data_ptr() for t in self._stitch_params())",
        "",
        "    def _apply(self, fn, *args, **kwargs):",
        '        """.to(), .cuda(), .double(): parameters move, so graphs are captured again."""',
        '        self.__dict__.pop("_stitch_runner", None)',
        '        self.__dict__.pop("_stitch_leaves", None)',
        "        return super()._apply(fn, *args, **kwargs)",
        "",
        "    @property",
        "    def _stitch_graph(self):",
        '        runner = self.__dict__.get("_stitch_runner")',
        "        if runner is None:",
        "            runner = GraphRunner(self._launch, guard=self._stitch_guard, "
        f"stages={stages}{plain})",
        '            self.__dict__["_stitch_runner"] = runner',
        "        return runner",
        "",
        f"    def _launch(self, {names}):",
        "        lib = _load()",
        f"        dev = {_device(graph)}",
        "        stream = torch.cuda.current_stream().cuda_stream",
    ]
    return lines


def _arena_plan(
    graph: Graph, groups: list[Group], cg: Codegen, prep: set[int]
) -> tuple[Placement, list[tuple[int, tuple[int, ...], str]], dict[str, int]]:
    """(placement, arena layout, slot per buffer key): intermediates and workspaces share one
    arena by liveness, and the forward addresses them by slot, in offset order."""
    buffers, meta = _buffers(graph, groups, cg, prep)
    placement = plan(buffers)
    order = sorted(buffers, key=lambda b: (placement.offsets[b.key], b.key))
    layout = [(placement.offsets[b.key], *meta[b.key]) for b in order]
    slot = {b.key: k for k, b in enumerate(order)}
    return placement, layout, slot


def _leaf_vars(graph: Graph) -> dict[int, str]:
    """The forward's names for the leaves: inputs by their own, parameters and buffers by
    their place in `leaves` (`_stitch_params`), factories as the f<vid> made in `_launch`."""
    var: dict[int, str] = {}
    params = 0
    for leaf in graph.leaves.values():
        var[leaf.vid] = leaf.expr if leaf.kind != "factory" else f"f{leaf.vid}"
        if leaf.kind in ("param", "buffer"):
            var[leaf.vid] = f"leaves[{params}]"
            params += 1
    return var


def _ref(graph: Graph, var: dict[int, str], u: Use) -> str:
    """A use as the forward reads it: its tensor, viewed when the use has another shape."""
    name = var[u.vid]
    shape = graph.shape_of(u.vid)
    return name if tuple(shape) == tuple(u.shape) else f"{name}.view({_py_shape(u.shape)})"


def _conv_stage(graph: Graph, var: dict[int, str], i: int, g: Group) -> Stage:
    """A convolution stays on cuDNN through PyTorch; its bias is fused into the next kernel."""
    st = Stage(i, g)
    node = g.nodes[0]
    x, w = node.uses
    p = node.params
    fn = node.fn
    if fn.startswith("conv_transpose"):
        call = (
            f"F.{fn}({_ref(graph, var, x)}, {_ref(graph, var, w)}, None, {p['stride']}, "
            f"{p['padding']!r}, {p['output_padding']}, {p['groups']}, {p['dilation']})"
        )
    else:
        xs = _ref(graph, var, x)
        if p.get("channels_last"):  # NHWC in, NHWC out: cuDNN takes the tensor as it lies
            xs = f"{xs}.permute(0, 3, 1, 2)"
        call = (
            f"F.{fn}({xs}, {_ref(graph, var, w)}, None, {p['stride']}, "
            f"{p['padding']!r}, {p['dilation']}, {p['groups']})"
        )
        if p.get("channels_last"):
            call += ".permute(0, 2, 3, 1)"
    where = "channels-last, " if p.get("channels_last") else ""
    st.lines.append(
        f"# stage {i}: {node.origin}: cuDNN through PyTorch ({where}its bias goes in our kernel)"
    )
    st.lines.append(f"t{node.vid} = {call}.contiguous()")
    var[node.vid] = f"t{node.vid}"
    return st


def _operand_ref(graph: Graph, var: dict[int, str], u: Use) -> str:
    """A fallback's tensor operand as the traced call saw it: the stored value through the use's
    view, and a predicate our kernels stored as 1.f / 0.f as the bool tensor it was traced as."""
    name = var[u.vid]
    if u.strided or u.trans:
        name = (
            f"{name}.as_strided({_py_shape(u.shape)}, {_py_shape(strides_of(u))}, "
            f"{name}.storage_offset() + {u.offset})"
        )
    elif tuple(graph.shape_of(u.vid)) != tuple(u.shape):
        name = f"{name}.view({_py_shape(u.shape)})"
    node = graph.node(u.vid) if u.vid not in graph.leaves else None
    if node is not None and node.kind != "aten" and node.dtype == "bool":
        name = f"{name}.ne(0)"
    return name


def _aten_stage(graph: Graph, var: dict[int, str], arena: set[int], i: int, g: Group) -> Stage:
    """Ops the builtin coder does not generate, run as the ATen calls the trace recorded. A
    result that may alias an operand in the arena (a view of it) is copied out, since a later
    stage reuses those bytes; other results are fresh PyTorch tensors."""
    st = Stage(i, g)
    st.lines.append(f"# stage {i}: PyTorch fallbacks (ops the builtin coder does not generate)")
    for node in g.nodes:
        expr = str(node.params["call"]).format(*(_operand_ref(graph, var, u) for u in node.uses))
        if "[" not in node.fn:
            st.lines.append(f"# {comment_text(_site(node))}: {comment_text(_why(node))}")
        if node.params.get("effect"):  # a buffer's in-place update: model state
            st.lines.append(expr)
            continue
        if node.dtype != "tuple":
            copy = node.params.get("copy") and _reads_arena(graph, node, arena)
            expr += ".clone(memory_format=torch.contiguous_format)" if copy else ".contiguous()"
        st.lines.append(f"t{node.vid} = {expr}")
        var[node.vid] = f"t{node.vid}"
    return st


def _reads_arena(graph: Graph, node: Node, arena: set[int]) -> bool:
    """Whether the call reads a value in the arena, directly or through a tuple it indexes."""
    for u in node.uses:
        src = graph.node(u.vid) if u.vid not in graph.leaves else None
        if u.vid in arena or (
            src is not None and src.dtype == "tuple" and _reads_arena(graph, src, arena)
        ):
            return True
    return False


def _why(node: Node) -> str:
    return str(node.params.get("why") or "not generated")


def _site(node: Node) -> str:
    """Where the op runs: the library line and the reference line that calls it."""
    return str(node.params.get("site") or node.origin or node.fn)


def fallback_ops(groups: list[Group]) -> list[Node]:
    """The ops that run as PyTorch calls, in order (a tuple's items are its one call)."""
    return [n for g in groups if g.kind == "aten" for n in g.nodes if "[" not in n.fn]


def _kernel_stage(
    graph: Graph,
    var: dict[int, str],
    slot: dict[str, int],
    i: int,
    g: Group,
    k: GroupKernel,
    vendor: bool,
) -> Stage:
    """One launcher call: intermediates come from the arena, forward's results are fresh."""
    st = Stage(i, g)
    st.lines.append(f"# stage {i}: {k.comment}")
    ptrs: list[str] = []
    for a in k.args:
        if a.role == "ws":
            ptrs.append(f"buf[{slot[f'ws{g.gid}']}].data_ptr()")
            continue
        if a.role == "out":
            key = f"t{a.vid}"
            if key in slot:
                st.lines.append(f"{key} = buf[{slot[key]}]")
            else:  # a result of forward: fresh memory on every call
                shape = graph.shape_of(a.vid)
                dtype = _torch_dtype(a.ctype)[0]
                st.lines.append(
                    f"{key} = torch.empty({_py_shape(shape)}, device=dev, dtype={dtype})"
                )
            var[a.vid] = key
        ptrs.append(f"{var[a.vid]}.data_ptr()")
    call = f"_check(lib.{k.name}({', '.join(ptrs)}, stream), lib, {k.name!r})"
    if g.kind == "attention" and vendor:
        st.lines += _attention_choice(graph, var, g, k, call)
    else:
        st.lines.append(call)
    return st


def vendor_attention(graph: Graph) -> bool:
    """Whether attention may also run as PyTorch's sdpa (timed against ours per site): in a
    model whose GEMMs or convolutions stay on cuBLAS and cuDNN and whose other work (norms,
    activations, residuals) runs in our kernels. Where the reference is heavy ops alone
    (projections and attention), the library would do the whole problem, which the static
    checks and the Verifier reject, so the program's own kernel runs."""
    heavy = {n.vid for n in graph.nodes if n.kind in ("gemm", "conv", "attn")}
    if not any(n.kind in ("gemm", "conv") for n in graph.nodes):
        return False
    for n in graph.nodes:
        if n.kind in ("reduce", "pool", "scan"):
            return True
        if n.kind != "ew" or n.fn == "identity":
            continue
        bias = (
            n.fn == "add"
            and any(u.vid in heavy for u in n.uses)
            and any(u.vid in graph.leaves for u in n.uses)
        )
        if not bias:
            return True
    return False


def _attention_choice(
    graph: Graph, var: dict[int, str], g: Group, k: GroupKernel, call: str
) -> list[str]:
    """Our flash kernel or PyTorch's sdpa into the same output, whichever the first call
    times faster (stitch_lsp.runtime.choice)."""
    node = g.nodes[0]
    p = node.params
    q, kk, v, *mask = node.uses
    refs = [_operand_ref(graph, var, u) for u in (q, kk, v)]
    extra = [f"scale={float(p['scale'])!r}"]  # type: ignore[arg-type]
    if p.get("causal"):
        extra.append("is_causal=True")
    period = 0
    if mask:
        m = _operand_ref(graph, var, mask[0])
        if p.get("mask") == "bool" and not m.endswith(".ne(0)"):
            m = f"{m}.bool()"
        extra.append(f"attn_mask={m}")
        if mask[0].shape[0] not in (1, q.shape[0]):  # a mask that repeats every `period` batches
            period = mask[0].shape[0]
            refs = [f"{r}.unflatten(0, (-1, {period}))" for r in refs]
    if q.shape[1] != kk.shape[1]:
        extra.append("enable_gqa=True")
    out = var[node.vid]
    sdpa = f"F.scaled_dot_product_attention({', '.join(refs + extra)})"
    if period:
        sdpa += ".flatten(0, 1)"
    # The stage's value is what the kept path returns: our kernel's arena buffer, or sdpa's own
    # output where it already lies as the buffer would (no copy).
    return [
        f"{out} = choice.run({k.name!r},",
        f"                   lambda: ({call}, {out})[1],",
        f"                   lambda: choice.into({out}, {sdpa}.transpose(1, 2)))",
    ]


def build_program(graph: Graph, groups: list[Group], cg: Codegen) -> Program:
    """ModelNew's forward and the methods it calls, as text, with the stages and arena plan
    that the candidate's docstring and layout constants describe."""
    _check_signature(graph)
    prep = preparation(graph, groups, cg)
    lines = _forward_head(graph, groups, bool(prep)) + _runner_methods(graph, groups, prep)
    placement, layout, slot = _arena_plan(graph, groups, cg, prep)
    body: list[str] = []
    if slot:
        body.append("buf = _arena(self).views(dev)  # planned intermediates, allocated once")
    for leaf in graph.leaves.values():
        if leaf.kind == "factory":
            body.append(
                f"f{leaf.vid} = {leaf.expr}({_py_shape(leaf.shape)}, device=dev)"
                "  # as the reference makes it"
            )
    var = _leaf_vars(graph)
    arena = {int(key[1:]) for key in slot if key.startswith("t")}
    kernels = {k.group.gid: k for k in cg.kernels}
    vendor = vendor_attention(graph)
    chooses = vendor and any(g.kind == "attention" for g in groups)
    if chooses:
        body.append("choice = _choice(self)  # per attention site: our kernel or sdpa, timed")
    stages = []
    for i, g in enumerate(groups):
        if g.kind == "conv":
            stages.append(_conv_stage(graph, var, i, g))
        elif g.kind == "aten":
            stages.append(_aten_stage(graph, var, arena, i, g))
        else:
            stages.append(_kernel_stage(graph, var, slot, i, g, kernels[g.gid], vendor))
            stages[-1].prepares = i in prep
    per_call = [ln for st in stages if not st.prepares for ln in st.lines]
    # what the launches read of weight preparation's results: arena slots kept between calls
    read = {
        u.vid
        for st in stages
        if not st.prepares
        for n in st.group.nodes + st.group.sinks
        for u in reads(graph, n, graph.recomputed)
    }
    for st in stages:
        if st.prepares:
            body += [
                f"t{vid} = buf[{slot[f't{vid}']}]  # prepared by _stitch_prepare"
                for vid in st.group.outputs
                if vid in read and f"t{vid}" in slot
            ]
    body += per_call
    outs = [_ref(graph, var, u) for u in graph.outputs]
    body.append("return " + (outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"))
    hoisted = [st for st in stages if st.prepares]
    # the parameters, where the launches read any (not only what preparation derived)
    if leaf_paths(graph) and (not hoisted or "leaves[" in "\n".join(body)):
        body.insert(0, "leaves = self._stitch_params()  # parameters and buffers, in order")
    if hoisted:
        # before `_launch`, whose head `_runner_methods` ended with
        head = lines.index(f"    def _launch(self, {', '.join(graph.input_names)}):")
        lines[head:head] = _prepare_method(hoisted, bool(slot))
    lines += ["        " + ln for ln in body]
    return Program(stages, placement, layout, "\n".join(lines), chooses)


def forward_source(graph: Graph, groups: list[Group], cg: Codegen) -> str:
    return build_program(graph, groups, cg).forward


def execution_note(program: Program) -> list[str]:
    """The docstring's account of how the forward runs, for a reader of the generated file."""
    kinds = {st.group.kind for st in program.stages}
    prep = program.preparation
    prep_note = (
        [
            f"Weight preparation: {len(prep)} stage(s) read parameters alone; they run before the",
            "launches (outside the graph) on the first call and again only when a tensor they",
            "read is replaced or written in place (ModelNew._stitch_prepare says how).",
        ]
        if prep
        else []
    )
    if len(program.stages) - len(prep) == 1 and "rnn" not in kinds:
        return [
            "Execution: one launch on the current stream. It runs plainly: replaying it as a CUDA",
            "graph (stitch_lsp.runtime.GraphRunner) would save no launches and add input and",
            "output copies; the runner's `mode` and `reason` (model._stitch_runner) say so.",
            f"Memory: {program.placement.describe()}.",
            *prep_note,
        ]
    lines = [
        "Execution: one program, stage by stage on the current stream; the host side is captured",
        "in a CUDA graph (stitch_lsp.runtime.GraphRunner) and replayed. The first call per input",
        "signature runs plainly (warm-up: library handles, workspaces, the arena); the second",
        "captures and replays; later calls copy their inputs into the graph's static buffers,",
        "replay, and return fresh copies of the outputs. Plain launches instead when",
        "STITCH_CUDA_GRAPH=0, when an input is on the CPU, when capture fails, or when copying",
        "the inputs and outputs would cost more than the launches replay saves; the runner's",
        "`mode` and `reason` (model._stitch_runner) say which and why.",
        f"Memory: {program.placement.describe()}.",
    ]
    if "conv" in kinds:
        lines.append("cuDNN convolutions run through PyTorch; under the graph their outputs come")
        lines.append("from the graph's private memory pool.")
    if "aten" in kinds:
        lines.append("PyTorch fallbacks run as the ATen calls the trace recorded, on the same")
        lines.append("stream and under the same graph; their results are fresh PyTorch tensors.")
    lines += prep_note
    if program.chooses:
        lines.append("Attention: each site runs our flash kernel or PyTorch's sdpa (cuDNN or")
        lines.append("FlashAttention), whichever the warm-up call times faster (the vendor only")
        lines.append("below 0.9x of ours); model._stitch_choice.picked and .times_ms say which.")
    return lines


def candidate_source(
    graph: Graph,
    groups: list[Group],
    cg: Codegen,
    cuda: str,
    reference_source: str,
    header: str,
) -> str:
    imports, init_body = model_parts(reference_source)
    digest = hashlib.sha256(cuda.encode()).hexdigest()[:12]
    launchers = {k.name: len(k.args) + 1 for k in cg.kernels}
    libraries: tuple[str, ...] = ()
    if cg.uses_cublas:
        libraries = ("cublas", "cublasLt") if "cublasLt.h" in cuda else ("cublas",)
    has_conv = any(g.kind == "conv" for g in groups)
    conv_note = (
        "\n# Convolutions stay on PyTorch's cuDNN path (the library call is the heavy op);\n"
        "# their bias and every op after them run in the generated kernels below.\n"
        if has_conv
        else ""
    )
    direct = [n for g in groups for n in g.nodes if is_direct(n)]
    if direct:
        sites = ", ".join(dict.fromkeys(n.origin for n in direct))
        conv_note += (
            f"\n# Computed in the generated kernels instead of cuDNN: {comment_text(sites)}.\n"
            "# A transposed convolution of so few products per output runs slowly there\n"
            "# (stitch_lsp/compiler/direct_conv.py); each output is summed over its landing taps.\n"
        )
    std_imports = [
        "import ctypes",
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
    ]
    extra_imports = [s for s in imports if s.strip() not in std_imports]
    program = build_program(graph, groups, cg)
    names = {k.group.gid: k for k in cg.kernels}
    stage_doc = []
    for st in program.stages:
        k = names.get(st.group.gid)
        if k is not None:
            when = " [weight preparation]" if st.prepares else ""
            stage_doc.append(f"  {st.index}. {k.name}{when}: {k.comment}")
        elif st.group.kind == "aten":
            ops = [n for n in st.group.nodes if "[" not in n.fn]
            stage_doc.append(f"  {st.index}. PyTorch fallback ({len(ops)} ATen call(s)):")
            stage_doc += [
                f"     {comment_text(str(n.params.get('display') or 'torch.ops.aten.' + n.fn))}: "
                f"{comment_text(_site(n))}; {comment_text(_why(n))}"
                for n in ops
            ]
        else:
            node = st.group.nodes[0]
            stage_doc.append(f"  {st.index}. torch.nn.functional.{node.fn} (cuDNN): {node.origin}")
    layout = ",\n".join(
        f"    ({off}, {_py_shape(shape)}, {dtype})" for off, shape, dtype in program.arena_layout
    )
    parts = [
        header_line(header),
        '"""Generated by the stitch-lsp builtin coder: fused CUDA kernels plus cuBLAS for GEMMs.',
        "",
        "Stages, in order (each a library call or one fused kernel):",
        *stage_doc,
        "",
        *execution_note(program),
        '"""',
        "",
        *std_imports,
        "",
        "from stitch_lsp.runtime import check_launch, load_cuda",
        "from stitch_lsp.runtime.graph import Arena, GraphRunner",
        *(["from stitch_lsp.runtime.choice import TimedChoice"] if program.chooses else []),
        *extra_imports,
        conv_note,
        f"CUDA_SOURCE = r'''{cuda}'''",
        "",
        f"_LAUNCHERS = {launchers!r}",
        "# The tensors the kernels read, by attribute path: names are looked up, never run.",
        f"_LEAF_PATHS = {tuple(leaf_paths(graph))!r}",
        "_lib = None",
        "# Intermediate buffers: (byte offset, shape, dtype), planned once by liveness.",
        f"_ARENA_LAYOUT = [\n{layout}\n]" if layout else "_ARENA_LAYOUT = []",
        f"_ARENA_BYTES = {program.placement.total}",
        "",
        "",
        "def _load():",
        '    """Build (nvcc, cached by content) and load the kernels once per process."""',
        "    global _lib",
        "    if _lib is None:",
        f'        lib = load_cuda(CUDA_SOURCE, name="stitch_builtin_{digest}",',
        f"                        libraries={libraries!r})",
        "        for name, nargs in _LAUNCHERS.items():",
        "            fn = getattr(lib, name)",
        "            fn.restype = ctypes.c_int",
        "            fn.argtypes = [ctypes.c_void_p] * nargs  # device pointers, then the stream",
        "        _lib = lib",
        "    return _lib",
        "",
        "",
        *(
            [
                "def _choice(model):",
                '    choice = model.__dict__.get("_stitch_choice")',
                "    if choice is None:",
                '        choice = model.__dict__["_stitch_choice"] = TimedChoice()',
                "    return choice",
                "",
                "",
            ]
            if program.chooses
            else []
        ),
        "def _arena(model):",
        '    arena = model.__dict__.get("_stitch_arena")',
        "    if arena is None:",
        '        arena = model.__dict__["_stitch_arena"] = Arena(_ARENA_LAYOUT, _ARENA_BYTES)',
        "    return arena",
        "",
        "",
        *TENSOR_AT_SOURCE.splitlines(),
        "",
        "",
        "def _check(code, lib, what):",
        "    if code == 0:",
        "        return",
        "    if code >= 10000:",
        '        raise RuntimeError(f"{what}: cuBLAS status {code - 10000}")',
        "    check_launch(code, lib, what)",
        "",
        "",
        "",
        "class ModelNew(nn.Module):",
        init_body,
        "",
        program.forward,
        "",
    ]
    text = "\n".join(parts)
    if not text.endswith("\n"):
        text += "\n"
    return text
