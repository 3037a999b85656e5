"""Write the candidate's Python: the reference's constructor, and a forward that calls the kernels.

ModelNew copies Model's constructor verbatim (and the module-level names it uses), so seeding
gives both the same weights, and the parameters keep their names. Its forward allocates outputs,
runs convolutions through PyTorch (cuDNN) when there are any, and calls the generated launchers
with raw pointers on the current stream. It does no tensor math of its own.
"""

from __future__ import annotations

import ast
import hashlib

from stitch_lsp.agents.builtin.codegen import Codegen
from stitch_lsp.agents.builtin.ir import Graph, Unsupported, Use
from stitch_lsp.agents.builtin.partition import Group


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


def forward_source(graph: Graph, groups: list[Group], cg: Codegen) -> str:
    var: dict[int, str] = {}
    lines: list[str] = []
    inputs = [lf for lf in graph.leaves.values() if lf.kind == "input"]
    first = graph.input_names[0] if graph.input_names else None
    sig = ", ".join(["self", *graph.input_names])
    lines.append(f"    def forward({sig}):")
    lines.append("        lib = _load()")
    for leaf in inputs:
        lines.append(
            f"        if tuple({leaf.expr}.shape) != {_py_shape(leaf.shape)}:\n"
            f"            raise ValueError(\n"
            f'                f"{leaf.expr} has shape {{tuple({leaf.expr}.shape)}}; this "\n'
            f'                "ModelNew was generated for {_py_shape(leaf.shape)}: generate it "\n'
            f'                "again for new shapes"\n'
            f"            )"
        )
        lines.append(f"        {leaf.expr} = {leaf.expr}.contiguous()")
    for leaf in graph.leaves.values():
        var[leaf.vid] = leaf.expr
    bn_modes = sorted(
        {str(s.params["module"]) for g in groups for s in g.sinks if "module" in s.params}
    )
    for mod in bn_modes:
        lines.append(
            f"        if not {mod}.training:\n"
            f'            raise RuntimeError("generated for {mod} in training mode (batch "\n'
            f'                               "statistics); generate again after .eval()")'
        )
    dev = f"{first}.device" if first else "torch.device('cuda')"
    names = ", ".join(graph.input_names)
    # The device guard costs microseconds before the first launch; enter it only when needed.
    lines.append(f"        if {dev}.index != torch.cuda.current_device():")
    lines.append(f"            with torch.cuda.device({dev}):")
    lines.append(f"                return self._launch(lib, {names})")
    lines.append(f"        return self._launch(lib, {names})")
    lines.append("")
    lines.append(f"    def _launch(self, lib, {names}):")
    lines.append("        stream = torch.cuda.current_stream().cuda_stream")
    body: list[str] = []
    kernels = {k.group.gid: k for k in cg.kernels}

    def ref(u: Use) -> str:
        name = var[u.vid]
        shape = graph.shape_of(u.vid)
        return name if tuple(shape) == tuple(u.shape) else f"{name}.view({_py_shape(u.shape)})"

    for g in groups:
        if g.kind == "conv":
            node = g.nodes[0]
            x, w = node.uses
            p = node.params
            fn = node.fn
            if fn.startswith("conv_transpose"):
                call = (
                    f"F.{fn}({ref(x)}, {ref(w)}, None, {p['stride']}, {p['padding']!r}, "
                    f"{p['output_padding']}, {p['groups']}, {p['dilation']})"
                )
            else:
                call = (
                    f"F.{fn}({ref(x)}, {ref(w)}, None, {p['stride']}, {p['padding']!r}, "
                    f"{p['dilation']}, {p['groups']})"
                )
            body.append(f"# {node.origin}: cuDNN through PyTorch; its bias is added in our kernel")
            body.append(f"t{node.vid} = {call}.contiguous()")
            var[node.vid] = f"t{node.vid}"
            continue
        k = kernels[g.gid]
        for a in k.args:
            if a.role == "ws":
                body.append(
                    f"ws{g.gid} = torch.empty(({a.nbytes},), device={dev}, dtype=torch.uint8)"
                    "  # partial row states"
                )
                var[a.vid] = f"ws{g.gid}"
            if a.role == "out":
                shape = graph.shape_of(a.vid)
                dtype = "torch.int64" if a.ctype.startswith("long long") else "torch.float32"
                body.append(
                    f"t{a.vid} = torch.empty({_py_shape(shape)}, device={dev}, dtype={dtype})"
                )
                var[a.vid] = f"t{a.vid}"
        ptrs = ", ".join(f"{var[a.vid]}.data_ptr()" for a in k.args)
        body.append(f"# {k.comment}")
        body.append(f"_check(lib.{k.name}({ptrs}, stream), lib, {k.name!r})")
    outs = [ref(u) for u in graph.outputs]
    body.append("return " + (outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"))
    lines += ["        " + ln for ln in body]
    return "\n".join(lines)


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
    std_imports = [
        "import ctypes",
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
    ]
    extra_imports = [s for s in imports if s.strip() not in std_imports]
    parts = [
        f"# stitch-lsp: reference={header}",
        '"""Generated by the stitch-lsp builtin coder: fused CUDA kernels plus cuBLAS for GEMMs.',
        "",
        "Groups:",
        *[f"  {k.name}: {k.comment}" for k in cg.kernels],
        '"""',
        "",
        *std_imports,
        "",
        "from stitch_lsp.runtime import check_launch, load_cuda",
        *extra_imports,
        conv_note,
        f"CUDA_SOURCE = r'''{cuda}'''",
        "",
        f"_LAUNCHERS = {launchers!r}",
        "_lib = None",
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
        forward_source(graph, groups, cg),
        "",
    ]
    text = "\n".join(parts)
    if not text.endswith("\n"):
        text += "\n"
    return text
