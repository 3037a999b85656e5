"""The forward scaffold (planner worker side, torch): the reference as an all-PyTorch ModelNew
whose forward is torch.fx's flat graph, one named statement per op.

A step-by-step run builds partial programs from it: the statements of one fusion group are
replaced by CUDA while the others stay as they are. The scaffold is only handed out after it has
been built and run on fake tensors here: it must hold the reference's parameters (names and
shapes) and give the reference's output shapes, so a later mismatch is the Coder's, never ours.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
from pathlib import Path
from typing import Any

from stitch_lsp.agents.partial import compose
from stitch_lsp.compiler.attr_path import comment_text
from stitch_lsp.models.agents import (
    ForwardScaffold,
    ScaffoldInput,
    ScaffoldStatement,
    TensorMeta,
)

# Globals torch.fx's code may name, and how the scaffold provides them.
_GLOBALS = {
    "torch": "import torch",
    "getattr": "",
    "inf": "from math import inf",
    "nan": "from math import nan",
    "device": "from torch import device",
    "NoneType": "NoneType = type(None)",
}
_BUILTINS = frozenset(dir(builtins))
_FRAME = re.compile(r'File "([^"]+)", line (\d+)')


class ScaffoldError(Exception):
    """The reference cannot be written as a flat forward; the message says why."""


def source_line(node: Any, reference: Path) -> int | None:
    """The innermost frame of `reference` in the node's stack trace: where the op is spelled."""
    trace = node.meta.get("stack_trace") or ""
    want = str(reference)
    lines = [int(n) for f, n in _FRAME.findall(trace) if f == want]
    return lines[-1] if lines else None


def tensor_meta(value: Any) -> TensorMeta | None:
    import torch

    if isinstance(value, torch.Tensor):
        return TensorMeta(
            shape=[int(s) for s in value.shape], dtype=str(value.dtype).removeprefix("torch.")
        )
    return None


# What torch.fx may paste into its code as a quoted getattr name: no quote, backslash or control.
_QUOTABLE = re.compile(r"[^'\"\\\x00-\x1f\x7f]+")


def _check_names(gm: Any) -> None:
    """torch.fx writes submodule and attribute names into its code as they are (an identifier,
    a keyword included) or between quotes it does not escape: a name it cannot write safely ends
    the scaffold here, so no name of the reference ever runs as code in it."""
    for node in gm.graph.nodes:
        if node.op in ("call_module", "get_attr"):
            parts = str(node.target).split(".")
            bad = [
                p
                for p in parts
                if keyword.iskeyword(p) or not (p.isidentifier() or _QUOTABLE.fullmatch(p))
            ]
        elif node.op == "call_method":
            name = str(node.target)
            bad = [] if name.isidentifier() and not keyword.iskeyword(name) else [name]
        else:
            continue
        if bad:
            raise ScaffoldError(
                f"the name {comment_text(repr(bad[0]))} cannot be written into a scaffold "
                "(a keyword, or a quote, backslash or control character in it)"
            )


def build(
    gm: Any,
    source: str,
    inputs: list[Any],
    lines: dict[str, int | None],
    metas: dict[str, TensorMeta | None],
) -> ForwardScaffold:
    """The scaffold of the traced `gm`; ScaffoldError when fx's code cannot stand on its own."""
    from stitch_lsp.compiler.ir import Unsupported
    from stitch_lsp.compiler.program import model_parts

    _check_names(gm)
    code = gm.graph.python_code(root_module="self")
    tree = ast.parse(code.src)
    fn = next((s for s in tree.body if isinstance(s, ast.FunctionDef)), None)
    if fn is None or fn.name != "forward":
        raise ScaffoldError("torch.fx produced no forward")
    nodes = {n.name: n for n in gm.graph.nodes}
    statements: list[ScaffoldStatement] = []
    returns = ""
    used: set[str] = set()
    for stmt in fn.body:
        if isinstance(stmt, ast.Return):
            returns = ast.unparse(stmt)
            used |= {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            continue
        none = isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant)
        if none and stmt.value.value is None:  # type: ignore[attr-defined]
            continue  # fx frees a dead value: `x = None`
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and stmt.targets[0].id in nodes
        ):
            raise ScaffoldError(f"unexpected statement in fx's forward: {ast.unparse(stmt)[:80]}")
        name = stmt.targets[0].id
        node = nodes[name]
        used |= {n.id for n in ast.walk(stmt.value) if isinstance(n, ast.Name)}
        statements.append(
            ScaffoldStatement(
                node=name,
                code=ast.unparse(stmt),
                args=[a.name for a in node.all_input_nodes],
                line=lines.get(name),
                meta=metas.get(name),
            )
        )
    if not returns:
        raise ScaffoldError("fx's forward has no return")
    defined = {s.node for s in statements}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    defined |= {n.name for n in placeholders} | {"self"}
    extra: list[str] = []
    for name in sorted(used - defined):
        if name in _GLOBALS:
            if _GLOBALS[name]:
                extra.append(_GLOBALS[name])
        elif name not in _BUILTINS:
            raise ScaffoldError(f"fx's forward needs the global `{name}`")
    try:
        imports, init_body = model_parts(source)
    except (Unsupported, SyntaxError) as exc:
        raise ScaffoldError(str(exc)) from None
    future = [i for i in imports if i.startswith("from __future__")]
    rest = [i for i in imports if i not in future]
    prelude = "\n".join(dict.fromkeys([*future, "import torch", *rest, *extra]))
    prelude += "\n\n\nclass ModelNew(torch.nn.Module):\n" + init_body
    signature = ast.unparse(fn).splitlines()[0]
    output = next(n for n in gm.graph.nodes if n.op == "output")
    in_metas = [tensor_meta(v) for v in inputs]
    return ForwardScaffold(
        prelude=prelude,
        signature=signature,
        inputs=[
            ScaffoldInput(name=p.name, meta=in_metas[i] if i < len(in_metas) else None)
            for i, p in enumerate(placeholders)
        ],
        statements=statements,
        returns=returns,
        output_args=[a.name for a in output.all_input_nodes],
    )


def validate(scaffold: ForwardScaffold, ns: dict[str, Any], fake: Any) -> None:
    """Build and run the scaffold's ModelNew on fake tensors beside the reference's Model."""
    import torch

    text = compose(scaffold, [])
    module: dict[str, Any] = {"__name__": "__stitch_scaffold__"}
    try:
        exec(compile(text, "<scaffold>", "exec"), module)  # our own generated code
    except Exception as exc:
        raise ScaffoldError(f"the scaffold does not load: {type(exc).__name__}: {exc}") from None
    with fake:
        torch.manual_seed(42)
        ref = ns["Model"](*ns["get_init_inputs"]())
        torch.manual_seed(42)
        try:
            new = module["ModelNew"](*ns["get_init_inputs"]())
        except Exception as exc:
            raise ScaffoldError(f"ModelNew() failed: {type(exc).__name__}: {exc}") from None
        want = {k: tuple(v.shape) for k, v in ref.state_dict().items()}
        got = {k: tuple(v.shape) for k, v in new.state_dict().items()}
        if want != got:
            raise ScaffoldError("the scaffold's parameters differ from the reference's")
        inputs = list(ns["get_inputs"]())
        try:
            with torch.no_grad():
                a, b = ref(*inputs), new(*inputs)
        except Exception as exc:
            raise ScaffoldError(f"its forward failed: {type(exc).__name__}: {exc}") from None
    flat_a, flat_b = _flat(a), _flat(b)
    if [(tuple(t.shape), t.dtype) for t in flat_a] != [(tuple(t.shape), t.dtype) for t in flat_b]:
        raise ScaffoldError("its outputs differ in shape or dtype from the reference's")


def _flat(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in _flat(v)]
    return []
