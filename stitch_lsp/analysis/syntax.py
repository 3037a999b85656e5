"""Small helpers over tree-sitter nodes shared by the Python and CUDA extractors."""

from __future__ import annotations

from tree_sitter import Node


def text(node: Node | None) -> str:
    if node is None:
        return ""
    return (node.text or b"").decode("utf-8", "replace")


def first_error(root: Node) -> Node | None:
    """The innermost first ERROR or MISSING node in document order, leaving out the one
    misparse of valid code we know of (see `_brace_body_misparse`)."""
    if not root.has_error:
        return None
    stack = [root]
    while stack:
        node = stack.pop()
        flagged = [c for c in node.children if c.has_error or c.is_missing]
        if not flagged:
            return node
        real = [c for c in flagged if not _brace_body_misparse(c)]
        stack.extend(reversed(real))
    return None


def _brace_body_misparse(node: Node) -> bool:
    """tree-sitter-cpp reads `void k(){{}}` (a body holding only empty blocks) as a declaration
    initialised with a brace list and then misses its `;`. That MISSING `;` is no error."""
    if not (node.is_missing and node.type == ";"):
        return False
    decl = node.parent
    if decl is None or decl.type != "declaration":
        return False
    init = decl.child_by_field_name("declarator")
    return (
        init is not None
        and init.type == "init_declarator"
        and (fn := init.child_by_field_name("declarator")) is not None
        and fn.type == "function_declarator"
        and (value := init.child_by_field_name("value")) is not None
        and value.type == "initializer_list"
    )


def ancestors(node: Node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def collapse(s: str) -> str:
    return " ".join(s.split())
