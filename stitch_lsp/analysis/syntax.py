"""Small helpers over tree-sitter nodes shared by the Python and CUDA extractors."""

from __future__ import annotations

from tree_sitter import Node


def text(node: Node | None) -> str:
    if node is None:
        return ""
    return (node.text or b"").decode("utf-8", "replace")


def first_error(root: Node) -> Node | None:
    """The innermost first ERROR or MISSING node in document order."""
    if not root.has_error:
        return None
    node = root
    while True:
        nxt = next((c for c in node.children if c.has_error or c.is_missing), None)
        if nxt is None:
            return node
        node = nxt


def ancestors(node: Node):
    parent = node.parent
    while parent is not None:
        yield parent
        parent = parent.parent


def collapse(s: str) -> str:
    return " ".join(s.split())
