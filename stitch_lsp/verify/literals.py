"""Values of call arguments written as literals, without running any of the candidate's code.

The static build (no GPU, or no torch) needs the source a candidate passes to `load_cuda(...)`
or `load_inline(...)` inside `forward`, which never runs. Evaluating those arguments with `eval`
would run whatever they contain (`SRC + str(__import__("os").system(...))`), so this evaluator
accepts only literals, names bound to literal values, containers of those, `+` between them
(string concatenation, constant folding) and f-strings whose fields are such values. Anything
else raises `NotLiteral`, and the caller skips the build and says why.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from typing import Any

_SCALARS = (str, bytes, int, float, complex, bool, type(None))
MAX_DEPTH = 50
MAX_CHARS = 50_000_000


class NotLiteral(ValueError):
    """The expression needs code to run; `node` is where."""

    def __init__(self, node: ast.AST, what: str) -> None:
        super().__init__(f"line {getattr(node, 'lineno', '?')}: {what}")
        self.node = node


def is_literal_value(value: Any, depth: int = 0) -> bool:
    """Whether `value` is made only of str/bytes/numbers/bool/None and tuples, lists, sets and
    dicts of them (so reading it runs no user code)."""
    if depth > MAX_DEPTH:
        return False
    if isinstance(value, _SCALARS) and type(value) in _SCALARS:
        return True
    if type(value) in (tuple, list, set, frozenset):
        return all(is_literal_value(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(
            is_literal_value(k, depth + 1) and is_literal_value(v, depth + 1)
            for k, v in value.items()
        )
    return False


def literal_value(node: ast.expr, names: Mapping[str, Any], depth: int = 0) -> Any:
    """The value of `node`, or NotLiteral. `names` maps names to values already known."""
    if depth > MAX_DEPTH:
        raise NotLiteral(node, "expression nested too deeply")
    d = depth + 1
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in names:
            raise NotLiteral(node, f"`{node.id}` is not bound to a literal at module level")
        value = names[node.id]
        if not is_literal_value(value):
            raise NotLiteral(node, f"`{node.id}` is not a literal value")
        return value
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            raise NotLiteral(node, "unpacking")
        items = [literal_value(e, names, d) for e in node.elts]
        return (
            tuple(items)
            if isinstance(node, ast.Tuple)
            else (items if isinstance(node, ast.List) else set(items))
        )
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            raise NotLiteral(node, "dict unpacking")
        return {
            literal_value(k, names, d): literal_value(v, names, d)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _add(node, literal_value(node.left, names, d), literal_value(node.right, names, d))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        operand = literal_value(node.operand, names, d)
        if type(operand) not in (int, float, complex):
            raise NotLiteral(node, "sign of a non-number")
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.JoinedStr):
        return "".join(_fstring_part(v, names, d) for v in node.values)
    raise NotLiteral(node, f"{type(node).__name__} needs code to run")


def _add(node: ast.BinOp, left: Any, right: Any) -> Any:
    kinds = (type(left), type(right))
    numbers = (int, float, complex)
    same_sequence = kinds[0] is kinds[1] and kinds[0] in (str, bytes, tuple, list)
    if not (same_sequence or (kinds[0] in numbers and kinds[1] in numbers)):
        raise NotLiteral(node, f"{kinds[0].__name__} + {kinds[1].__name__}")
    if same_sequence and len(left) + len(right) > MAX_CHARS:
        raise NotLiteral(node, "result too large")
    return left + right


def _fstring_part(node: ast.expr, names: Mapping[str, Any], depth: int) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    if not isinstance(node, ast.FormattedValue):
        raise NotLiteral(node, "f-string part")
    value = literal_value(node.value, names, depth)
    if type(value) not in _SCALARS:
        raise NotLiteral(node, "f-string field that is not a scalar")
    spec = ""
    if node.format_spec is not None:
        if not isinstance(node.format_spec, ast.JoinedStr):
            raise NotLiteral(node, "f-string format")
        spec = "".join(_fstring_part(v, names, depth) for v in node.format_spec.values)
        if re.search(r"\d{6,}", spec):
            raise NotLiteral(node, "f-string width too large")
    if node.conversion == ord("r"):
        value = repr(value)
    elif node.conversion == ord("s"):
        value = str(value)
    elif node.conversion == ord("a"):
        value = ascii(value)
    return format(value, spec)


def module_literals(tree: ast.Module) -> dict[str, Any]:
    """Module-level `NAME = <literal expression>` assignments, in order (later ones may use
    earlier ones: `SRC = HEADER + BODY`). Other statements are ignored, never run."""
    names: dict[str, Any] = {}
    for node in tree.body:
        targets: list[ast.expr]
        if isinstance(node, ast.Assign):
            targets, value = node.targets, node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            targets, value = [node.target], node.value
        else:
            continue
        try:
            result = literal_value(value, names)
        except NotLiteral:
            for t in targets:
                if isinstance(t, ast.Name):
                    names.pop(t.id, None)  # rebound to something unknown
            continue
        for t in targets:
            if isinstance(t, ast.Name):
                names[t.id] = result
    return names
