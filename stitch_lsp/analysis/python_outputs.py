"""What forward returns and writes: nothing, a constant, a cached tensor, or its own input.

A forward that returns its input, a fresh `torch.empty` no kernel wrote, or a tensor kept on
the module computes nothing; one that writes into its inputs changes what the reference and
later trials see.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from tree_sitter import Node

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.python_facts import param_names
from stitch_lsp.analysis.syntax import text
from stitch_lsp.models.findings import Severity

if TYPE_CHECKING:
    from stitch_lsp.analysis.python_checks import CandidateContext

_ALLOC = re.compile(
    r"^(torch\.)?(zeros|ones|full|empty|zeros_like|ones_like|full_like|empty_like|rand|randn"
    r"|rand_like|randn_like|tensor|as_tensor|empty_strided)$"
)
_NOT_MUTATIONS = frozenset({"requires_grad_", "share_memory_", "retain_grad"})
# Methods that return the same storage: the result still is the input.
_ALIAS_METHODS = frozenset(
    {"contiguous", "view", "view_as", "reshape", "flatten", "squeeze", "unsqueeze", "detach", "t"}
)


def _is_alloc(ctx: CandidateContext, fn: Node) -> bool:
    """`torch.empty(...)`, also as `E = torch.empty_like; E(x)` or `getattr(torch, "zeros")`."""
    if _ALLOC.match(text(fn)):
        return True
    dotted = ctx.resolver.dotted(fn)
    return dotted is not None and dotted.startswith("torch.") and bool(_ALLOC.match(dotted))


def _statements(fn: Node) -> list[Node]:
    body = fn.child_by_field_name("body")
    if body is None:
        return []
    out = []
    for i, s in enumerate(body.named_children):
        if s.type == "comment":
            continue
        if (
            i == 0
            and s.type == "expression_statement"
            and s.named_child_count == 1
            and s.named_children[0].type == "string"
        ):
            continue  # docstring
        out.append(s)
    return out


def check_noop(ctx: CandidateContext, fwd: Node) -> None:
    stmts = _statements(fwd)
    params = [p for p in param_names(fwd) if p != "self"]
    name = fwd.child_by_field_name("name") or fwd
    meaningful = [
        s
        for s in stmts
        if not (
            s.type == "pass_statement"
            or (s.type == "expression_statement" and text(s) in ("...", "Ellipsis"))
        )
    ]
    if not meaningful:
        ctx.add(name, Severity.error, "noop-forward", "forward has no body: it computes nothing")
        return
    if len(meaningful) == 1 and meaningful[0].type == "return_statement":
        ret = meaningful[0]
        value = ret.named_children[0] if ret.named_children else None
        v = text(value)
        if (
            value is None
            or v in params
            or re.fullmatch(
                rf"({'|'.join(map(re.escape, params)) or '$^'})\.(clone|contiguous|detach)\(\)", v
            )
        ):
            ctx.add(
                ret,
                Severity.error,
                "noop-forward",
                "forward returns its input unchanged: it computes nothing",
            )


def _identifiers(node: Node, name: str) -> Iterable[Node]:
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier" and text(n) == name:
            yield n
        elif n.type == "attribute" and text(n) == name:
            yield n
            continue
        stack.extend(n.children)


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _passed_to_call(ident: Node) -> bool:
    """Whether an identifier/attribute is an argument (or the receiver) of some call."""
    node = ident
    parent = node.parent
    while parent is not None:
        if parent.type in ("argument_list", "keyword_argument"):
            return True
        if parent.type == "attribute" and parent.child_by_field_name("object") == node:
            # out.data_ptr(), out.copy_(...), out.fill_(...)
            grand = parent.parent
            if grand is not None and grand.type == "call":
                return True
        if parent.type == "subscript" and parent.child_by_field_name("value") == node:
            grand = parent.parent
            if grand is not None and grand.type == "assignment":
                return True  # out[...] = ...
        if parent.type in ("expression_statement", "block", "return_statement", "assignment"):
            return False
        node, parent = parent, parent.parent
    return False


def check_constant_output(ctx: CandidateContext, fwd: Node) -> None:
    found = grammars.captures("python", "function_body", fwd)
    body = fwd.child_by_field_name("body")
    if body is None:
        return
    for ret in found.get("return", []):
        if not ret.named_children:
            continue
        value = ret.named_children[0]
        items = value.named_children if value.type in ("tuple", "expression_list") else [value]
        for item in items:
            _check_returned(ctx, body, ret, item)


def _check_returned(ctx: CandidateContext, body: Node, ret: Node, item: Node) -> None:
    if item.type == "call":
        fn = item.child_by_field_name("function")
        if fn is not None and _is_alloc(ctx, fn):
            ctx.add(
                item,
                Severity.error,
                "constant-output",
                f"returns a fresh `{text(fn)}(...)` that no kernel wrote: the output ignores "
                "the inputs",
            )
        return
    if item.type == "identifier":
        name = text(item)
        assigned = None
        for n in _identifiers(body, name):
            parent = n.parent
            if (
                parent is not None
                and parent.type == "assignment"
                and parent.child_by_field_name("left") == n
            ):
                right = parent.child_by_field_name("right")
                if (
                    right is not None
                    and right.start_byte < ret.start_byte
                    and (assigned is None or parent.start_byte > assigned[0].start_byte)
                ):
                    assigned = (parent, right)
        if assigned is None or assigned[1].type != "call":
            return
        fn = assigned[1].child_by_field_name("function")
        if fn is None or not _is_alloc(ctx, fn):
            return
        for n in _identifiers(body, name):
            if n.start_byte > assigned[0].end_byte and not _inside(n, ret) and _passed_to_call(n):
                return
        ctx.add(
            item,
            Severity.error,
            "constant-output",
            f"returns `{name}`, made by `{text(fn)}(...)` and never written by a kernel: "
            "the output ignores the inputs",
        )
        return
    if item.type == "attribute" and text(item).startswith("self."):
        name = text(item)
        for n in _identifiers(body, name):
            if not _inside(n, ret) and _passed_to_call(n):
                return
        ctx.add(
            item,
            Severity.error,
            "constant-output",
            f"returns `{name}`, a tensor kept on the module that forward never writes: a "
            "cached output ignores new inputs",
        )


def _alias_of(expr: Node | None, aliases: set[str]) -> bool:
    """Whether an expression is (a view of) one of `aliases`."""
    while expr is not None:
        if expr.type == "identifier":
            return text(expr) in aliases
        if expr.type == "parenthesized_expression" and expr.named_child_count == 1:
            expr = expr.named_children[0]
            continue
        fn = expr.child_by_field_name("function") if expr.type == "call" else None
        if (
            fn is not None
            and fn.type == "attribute"
            and text(fn.child_by_field_name("attribute")) in _ALIAS_METHODS
        ):
            expr = fn.child_by_field_name("object")
            continue
        return False
    return False


def _handed_to_call(ident: Node) -> bool:
    """`f(x)`, `f(x.data_ptr())`, `f(ctypes.c_void_p(x.data_ptr()))`: a callee may write it."""
    node = ident
    parent = node.parent
    if (
        parent is not None
        and parent.type == "attribute"
        and parent.child_by_field_name("object") == node
    ):
        call = parent.parent
        if text(parent.child_by_field_name("attribute")) != "data_ptr" or call is None:
            return False
        node, parent = call, call.parent
    while parent is not None and parent.type in ("argument_list", "keyword_argument", "call"):
        if parent.type in ("argument_list", "keyword_argument"):
            return True
        node, parent = parent, parent.parent
    return False


def check_input_mutation(ctx: CandidateContext, fwd: Node) -> None:
    """In-place writes to forward's inputs (x.zero_(), x[...] = v, x.data = t, or returning an
    input a launcher wrote into): the reference and later trials then see different inputs."""
    params = [p for p in param_names(fwd) if p != "self" and not p.startswith("*")]
    body = fwd.child_by_field_name("body")
    if not params or body is None:
        return
    events: list[Node] = []
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type in ("assignment", "call", "return_statement"):
            events.append(node)
        if node.type not in ("function_definition", "lambda", "class_definition"):
            stack.extend(node.named_children)
    events.sort(key=lambda n: n.start_byte)
    aliases = set(params)
    handed: set[str] = set()  # aliases a call received: it may have written them
    for node in events:
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and left.type == "identifier":
                if _alias_of(right, aliases):
                    aliases.add(text(left))
                else:
                    aliases.discard(text(left))
            elif left is not None and left.type in ("subscript", "attribute"):
                target = left.child_by_field_name("value" if left.type == "subscript" else "object")
                if target is not None and target.type == "identifier" and text(target) in aliases:
                    _mutation(ctx, left, text(target))
        elif node.type == "call":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            first = args.named_children[0] if args is not None and args.named_children else None
            if (
                fn is not None
                and first is not None
                and first.type == "identifier"
                and text(first) in aliases
                and _in_place_function(ctx, fn)
            ):
                _mutation(ctx, node, text(first))  # torch.relu_(x), torch.zero_(x)
            if fn is not None and fn.type == "attribute":
                obj = fn.child_by_field_name("object")
                method = text(fn.child_by_field_name("attribute"))
                if (
                    obj is not None
                    and obj.type == "identifier"
                    and text(obj) in aliases
                    and method.endswith("_")
                    and not method.startswith("_")
                    and method not in _NOT_MUTATIONS
                ):
                    _mutation(ctx, node, text(obj))
            for ident in _identifiers_in(args, aliases):
                if _handed_to_call(ident):
                    handed.add(text(ident))
        elif node.named_children:
            value = node.named_children[0]
            items = value.named_children if value.type in ("tuple", "expression_list") else [value]
            for item in items:
                if item.type == "identifier" and text(item) in aliases and text(item) in handed:
                    ctx.add(
                        item,
                        Severity.warning,
                        "input-mutation",
                        f"returns `{text(item)}`, which is an input a launcher was given: the "
                        "result is written over the input",
                    )


def _in_place_function(ctx: CandidateContext, fn: Node) -> bool:
    """`torch.relu_` and kin: torch functions that write their first argument."""
    dotted = ctx.resolver.dotted(fn)
    if dotted is None or not dotted.startswith("torch.") or "()" in dotted:
        return False
    name = dotted.rsplit(".", 1)[-1]
    return name.endswith("_") and not name.startswith("_") and name not in _NOT_MUTATIONS


def _identifiers_in(node: Node | None, names: set[str]) -> list[Node]:
    out: list[Node] = []
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        if n.type == "identifier" and text(n) in names:
            out.append(n)
        stack.extend(n.named_children)
    return out


def _mutation(ctx: CandidateContext, node: Node, name: str) -> None:
    ctx.add(
        node,
        Severity.warning,
        "input-mutation",
        f"writes into the input `{name}` in place: the reference and later trials would see "
        "changed inputs",
    )
