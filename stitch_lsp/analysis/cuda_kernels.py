"""What a kernel does with its pointers, and which code the preprocessor or a constant `if`
removes.

Kernels that never read an input, store only constants, or have an empty body cannot compute
the answer; launches under `#if 0` or `#ifdef NEVER_DEFINED` never run. These facts are read
off the syntax tree once per source text (cached with the other CUDA facts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from stitch_lsp.analysis.syntax import text

Span = tuple[int, int]

# Macros the compiler, CUDA or PyTorch may define: an `#ifdef` on one of them is not dead code.
_TOOLCHAIN_MACRO = re.compile(
    r"^(_|CUDA|CUBLAS|CUDNN|CUTLASS|CUB_|THRUST|TORCH|AT_|C10|NV|USE_ROCM|HIP|ROCM|WITH_|NDEBUG"
    r"|DEBUG$|GOOGLE|PYBIND|Py|PY_|EIGEN|OMP|OPENMP|__)"
)
_INT = re.compile(r"^\(?\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*\)?$")
_ATOMICS = re.compile(r"^atomic\w+$")
_SIXTEEN_BIT = re.compile(
    r"\b(half|__half|__half2|half2|__nv_bfloat16|__nv_bfloat162|nv_bfloat16|at::Half|c10::Half"
    r"|at::BFloat16|c10::BFloat16)\b"
)


@dataclass(slots=True)
class Branch:
    """One branch of a conditional: its span, and the conditions that must hold for it to be
    compiled, as (condition text or `defined:NAME`, wanted truth value)."""

    span: Span
    terms: list[tuple[str, bool]]


@dataclass(slots=True)
class PointerUse:
    index: int  # parameter position
    name: str
    const: bool
    sixteen_bit: bool
    reads: int = 0
    writes: int = 0
    constant_writes: int = 0


@dataclass(slots=True)
class KernelUse:
    """How one kernel uses its pointer parameters."""

    pointers: list[PointerUse] = field(default_factory=list)
    empty: bool = False

    @property
    def reads_pointers(self) -> bool:
        return any(p.reads for p in self.pointers)

    @property
    def stores(self) -> int:
        return sum(p.writes for p in self.pointers)

    @property
    def constant_stores(self) -> int:
        return sum(p.constant_writes for p in self.pointers)

    def written(self, index: int) -> bool:
        return any(p.index == index and p.writes for p in self.pointers)


def branches(root: Node, data: bytes, offsets: list[int]) -> list[Branch]:
    """Conditional regions around the given `#if`/`if (` offsets, each with its condition."""
    out: list[Branch] = []
    seen: set[int] = set()
    for at in offsets:
        node = root.descendant_for_byte_range(at, at + 1)
        while node is not None and node.type not in (
            "preproc_if",
            "preproc_ifdef",
            "if_statement",
        ):
            node = node.parent
        if node is None or node.id in seen:
            continue
        seen.add(node.id)
        if node.type == "if_statement":
            cond = node.child_by_field_name("condition")
            body = node.child_by_field_name("consequence")
            if cond is None or body is None:
                continue
            value = cond.child_by_field_name("value") or cond
            expr = "c:" + text(value).strip()  # a C condition: only literals are known
            out.append(Branch((body.start_byte, body.end_byte), [(expr, True)]))
            alt = node.child_by_field_name("alternative")
            if alt is not None:
                out.append(Branch((alt.start_byte, alt.end_byte), [(expr, False)]))
            continue
        _preproc_chain(node, out)
    return out


def _preproc_chain(node: Node, out: list[Branch]) -> None:
    """`#if A / #elif B / #else` -> branches with their conjunctions of conditions."""
    previous: list[tuple[str, bool]] = []
    current: Node | None = node
    while current is not None:
        alt = current.child_by_field_name("alternative")
        if current.type == "preproc_ifdef":
            name = text(current.child_by_field_name("name"))
            negate = bool(current.children) and current.children[0].type == "#ifndef"
            cond = (f"defined:{name}", not negate)
        elif current.type == "preproc_else":
            cond = None
        else:
            cond = (text(current.child_by_field_name("condition")).strip(), True)
        head = current.child_by_field_name("condition") or current.child_by_field_name("name")
        start = head.end_byte if head is not None else current.start_byte + 5
        end = alt.start_byte if alt is not None else current.end_byte
        terms = [(c, not v) for c, v in previous] + ([cond] if cond else [])
        out.append(Branch((start, end), terms))
        if cond is not None:
            previous.append(cond)
        current = alt if alt is not None and alt.type in ("preproc_elif", "preproc_else") else None


def condition_value(expr: str, defined: set[str], complete: bool) -> bool | None:
    """The truth of a preprocessor or constant C condition, or None when it depends on what
    the build defines. `defined` holds the macros known to be defined; `complete` says that
    nothing else is (the build's -D flags are known)."""
    expr = expr.strip()
    if expr.startswith("c:"):
        expr = expr[2:].strip()
        if re.search(
            r"[A-Za-z_]",
            expr.replace("false", "")
            .replace("true", "")
            .replace("nullptr", "")
            .replace("NULL", ""),
        ) and not _INT.match(expr):
            return None  # names a variable: known only at run time
    while expr.startswith("(") and expr.endswith(")") and expr.count("(") == 1:
        expr = expr[1:-1].strip()
    if expr.startswith("defined:"):
        return _defined(expr[8:], defined, complete)
    if expr in ("false", "0", "0u", "0U", "nullptr", "NULL"):
        return False
    if expr == "true":
        return True
    m = _INT.match(expr)
    if m:
        return int(m.group(1), 0) != 0
    if expr.startswith("!"):
        inner = condition_value(expr[1:], defined, complete)
        return None if inner is None else not inner
    if "||" in expr or "&&" in expr:
        op = "||" if "||" in expr else "&&"
        parts = [condition_value(p, defined, complete) for p in expr.split(op)]
        if op == "&&":
            if any(p is False for p in parts):
                return False
            return True if all(p is True for p in parts) else None
        if any(p is True for p in parts):
            return True
        return False if all(p is False for p in parts) else None
    m = re.fullmatch(r"defined\s*\(?\s*(\w+)\s*\)?", expr)
    if m:
        return _defined(m.group(1), defined, complete)
    if re.fullmatch(r"[A-Za-z_]\w*", expr):
        # An undefined macro is 0 in `#if`; a defined one has a value we did not read.
        known = _defined(expr, defined, complete)
        return False if known is False else None
    return None


def _defined(name: str, defined: set[str], complete: bool) -> bool | None:
    if name in defined:
        return True
    if _TOOLCHAIN_MACRO.match(name) or not complete:
        return None
    return False


def dead_reason(branch: Branch, defined: set[str], complete: bool) -> str | None:
    """Why a branch is never compiled (or never runs), or None when it may be."""
    for cond, want in branch.terms:
        value = condition_value(cond, defined, complete)
        if value is not None and value != want:
            shown = cond[8:] if cond.startswith("defined:") else cond.removeprefix("c:")
            if cond.startswith("defined:"):
                return (
                    f"`#ifdef {shown}`, which nothing defines"
                    if want
                    else (f"`#ifndef {shown}`, which is defined")
                )
            return f"a condition that is always {'false' if want else 'true'} (`{shown}`)"
    return None


# -- kernels ----------------------------------------------------------------------------------


def _declarator_name(decl: Node | None) -> tuple[str | None, bool]:
    """(name, is pointer) of a parameter declarator."""
    pointer = False
    node = decl
    while node is not None and node.type != "identifier":
        if node.type in ("pointer_declarator", "abstract_pointer_declarator", "array_declarator"):
            pointer = True
        inner = node.child_by_field_name("declarator")
        if inner is None:
            inner = next((c for c in node.named_children if c.type == "identifier"), None)
        node = inner
    return (text(node) if node is not None else None), pointer


def pointer_params(declarator: Node) -> list[PointerUse]:
    node: Node | None = declarator
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    plist = node.child_by_field_name("parameters") if node is not None else None
    out: list[PointerUse] = []
    if plist is None:
        return out
    index = 0
    for p in plist.named_children:
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        name, pointer = _declarator_name(p.child_by_field_name("declarator"))
        type_text = text(p.child_by_field_name("type"))
        if name is not None and (pointer or "Accessor" in type_text):
            head = text(p)[: max(0, text(p).find(name))]
            const = bool(re.search(r"\bconst\b", head.split("*", 1)[0]))
            out.append(PointerUse(index, name, const, bool(_SIXTEEN_BIT.search(type_text))))
        index += 1
    return out


def _is_constant(expr: Node | None) -> bool:
    if expr is None:
        return False
    kind = expr.type
    if kind in ("number_literal", "true", "false", "null", "char_literal", "nullptr"):
        return True
    if kind in ("parenthesized_expression", "cast_expression"):
        inner = expr.child_by_field_name("value") or (
            expr.named_children[-1] if expr.named_children else None
        )
        return _is_constant(inner)
    if kind == "unary_expression":
        return _is_constant(expr.child_by_field_name("argument"))
    if kind == "binary_expression":
        op = expr.child_by_field_name("operator")
        left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
        if op is not None and op.type == "*" and (_is_zero(left) or _is_zero(right)):
            return True
        return _is_constant(left) and _is_constant(right)
    if kind == "call_expression":  # make_float4(0.f, 0.f, 0.f, 0.f), __float2half(0.f)
        args = expr.child_by_field_name("arguments")
        items = [a for a in args.named_children if a.type != "comment"] if args else []
        return bool(items) and all(_is_constant(a) for a in items)
    return False


def _is_zero(node: Node | None) -> bool:
    if node is None:
        return False
    if node.type == "parenthesized_expression" and node.named_children:
        return _is_zero(node.named_children[0])
    if node.type != "number_literal":
        return False
    raw = text(node).rstrip("fFuUlL")
    try:
        return float.fromhex(raw) == 0 if raw.lower().startswith("0x") else float(raw) == 0
    except ValueError:
        return False


_CLIMB_THROUGH = frozenset({"parenthesized_expression", "cast_expression"})


def _use(ident: Node) -> tuple[str, Node | None]:
    """("write", stored value) | ("both", None) | ("read", None) for one use of a pointer."""
    node, parent = ident, ident.parent
    while parent is not None:
        kind = parent.type
        if (
            (kind == "subscript_expression" and parent.child_by_field_name("argument") == node)
            or kind in _CLIMB_THROUGH
            or (
                kind == "binary_expression" and text(parent.child_by_field_name("operator")) in "+-"
            )
            or (
                kind == "pointer_expression" and text(parent.child_by_field_name("operator")) == "*"
            )
            or (kind == "field_expression" and parent.child_by_field_name("argument") == node)
        ):
            pass
        elif kind == "argument_list":
            call = parent.parent
            fn = call.child_by_field_name("function") if call is not None else None
            if (
                call is not None
                and fn is not None
                and re.match(r"^(reinterpret|static|const)_cast\b", text(fn))
            ):
                node, parent = call, call.parent
                continue
            if (
                fn is not None
                and _ATOMICS.match(text(fn))
                and parent.named_children
                and parent.named_children[0] == node
            ):
                return "write", None
            return "read", None
        elif kind == "pointer_expression":  # &p[i] handed somewhere
            grand = parent.parent
            if grand is not None and grand.type == "argument_list":
                call = grand.parent
                fn = call.child_by_field_name("function") if call is not None else None
                if (
                    fn is not None
                    and _ATOMICS.match(text(fn))
                    and grand.named_children[0] == parent
                ):
                    return "write", None
            return "read", None
        else:
            break
        node, parent = parent, parent.parent
    if (
        parent is not None
        and parent.type == "assignment_expression"
        and parent.child_by_field_name("left") == node
    ):
        op = parent.child_by_field_name("operator")
        if op is not None and op.type == "=":
            return "write", parent.child_by_field_name("right")
        return "both", None
    if parent is not None and parent.type == "update_expression":
        return "both", None
    return "read", None


def kernel_use(fn: Node, declarator: Node, body: Node, data: bytes, dead: list[Span]) -> KernelUse:
    """Reads and writes of each pointer parameter in a kernel's body (live code only)."""
    out = KernelUse(pointers=pointer_params(declarator))
    live = [
        c
        for c in body.named_children
        if c.type != "comment"
        and not (c.type == "expression_statement" and not c.named_children)
        and not (c.type == "return_statement" and not c.named_children)
        and not any(a <= c.start_byte and c.end_byte <= b for a, b in dead)
    ]
    out.empty = not live or all(
        c.type in ("preproc_if", "preproc_ifdef") and not _has_statements(c, dead) for c in live
    )
    for p in out.pointers:
        raw = p.name.encode()
        at = data.find(raw, body.start_byte, body.end_byte)
        while at != -1:
            node = fn.descendant_for_byte_range(at, at + len(raw))
            if (
                node is not None
                and node.type == "identifier"
                and node.start_byte == at
                and node.end_byte == at + len(raw)
                and not any(a <= at < b for a, b in dead)
            ):
                how, value = _use(node)
                if how in ("read", "both"):
                    p.reads += 1
                if how in ("write", "both"):
                    p.writes += 1
                    if how == "write" and _is_constant(value):
                        p.constant_writes += 1
            at = data.find(raw, at + len(raw), body.end_byte)
    return out


def _has_statements(node: Node, dead: list[Span]) -> bool:
    for c in node.named_children:
        if c.type in ("comment", "identifier", "number_literal", "preproc_defined"):
            continue
        if c.type in ("preproc_else", "preproc_elif", "preproc_if", "preproc_ifdef"):
            if _has_statements(c, dead):
                return True
            continue
        if c.type.endswith("expression") and c == node.child_by_field_name("condition"):
            continue
        if not any(a <= c.start_byte and c.end_byte <= b for a, b in dead):
            return True
    return False
