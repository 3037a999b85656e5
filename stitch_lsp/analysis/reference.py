"""What the reference computes and in which precision, read from its source.

The reference is `Model` in the candidate's own file, or the file its `# stitch-lsp:
reference=PATH` header names. Two things come from it: the dtype of its inputs (so an fp16
problem's kernels are not called downcasts) and the PyTorch operators its forward runs (so a
candidate that hands the whole problem back to PyTorch is recognised).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from tree_sitter import Node

from stitch_lsp.analysis import grammars, python_facts
from stitch_lsp.analysis.names import Resolver
from stitch_lsp.analysis.python_facts import PyFacts
from stitch_lsp.analysis.syntax import text
from stitch_lsp.analysis.torch_ops import classify_resolved, op_family
from stitch_lsp.files import binary_reason, read_regular

_HALF = re.compile(r"float16|\.half\(\)|\btorch\.half\b|\bHalfTensor\b")
_BF16 = re.compile(r"bfloat16|BFloat16Tensor")
_ARITHMETIC = frozenset({"+", "-", "*", "/", "//", "**", "%"})
Dtype = str  # "float32" | "float16" | "bfloat16"


@dataclass(frozen=True, slots=True)
class ReferenceInfo:
    """The reference's input precision (None when it does not say) and the operator families
    its forward runs in PyTorch, with whether it also does elementwise arithmetic."""

    dtype: Dtype | None
    ops: frozenset[str]
    shown: tuple[str, ...]  # the operators as written, for messages
    arithmetic: bool


def dtype_of(source: str) -> Dtype | None:
    """The precision a get_inputs/Model source asks for: fp16, bf16, else fp32."""
    if _BF16.search(source):
        return "bfloat16"
    if _HALF.search(source):
        return "float16"
    return "float32"


def reference_info(facts: PyFacts, resolver: Resolver) -> ReferenceInfo | None:
    """From the `Model` class and `get_inputs` of a parsed file; None with neither."""
    model = facts.cls("Model")
    gi = facts.functions.get("get_inputs")
    if model is None and gi is None:
        return None
    dtype = dtype_of((text(model.node) if model else "") + (text(gi) if gi is not None else ""))
    fwd = model.methods.get("forward") if model is not None else None
    ops: set[str] = set()
    shown: list[str] = []
    arithmetic = False
    if fwd is not None:
        found = grammars.captures("python", "function_body", fwd)
        for call in found.get("call", []):
            fn = call.child_by_field_name("function")
            if fn is None:
                continue
            hit = classify_resolved(text(fn), resolver.resolve(fn), set())
            if hit is not None:
                ops.add(op_family(hit[2]))
                shown.append(hit[1])
        if found.get("matmul"):
            ops.add("gemm")
            shown.append("@")
        arithmetic = _has_arithmetic(fwd)
    return ReferenceInfo(dtype, frozenset(ops), tuple(dict.fromkeys(shown)), arithmetic)


def _has_arithmetic(fwd: Node) -> bool:
    """Elementwise arithmetic on tensors (`x * self.scale`, `x + y`), not on sizes."""
    stack = [fwd.child_by_field_name("body")]
    while stack:
        n = stack.pop()
        if n is None:
            continue
        if n.type in ("binary_operator", "augmented_assignment"):
            op = n.child_by_field_name("operator")
            if op is not None and op.type.rstrip("=") in _ARITHMETIC:
                left = n.child_by_field_name("left")
                right = n.child_by_field_name("right")
                if not (_sizeish(left) and _sizeish(right)):
                    return True
        stack.extend(n.named_children)
    return False


def _sizeish(node: Node | None) -> bool:
    """Numbers and shape expressions (`x.size(0)`, `x.shape[1]`, `n`), not tensors."""
    if node is None:
        return True
    t = text(node)
    return node.type in ("integer", "float") or bool(
        re.fullmatch(r"[\w.]*(shape|size\(\w*\)|numel\(\)|dim\(\))(\[\w+\])?|\d+", t)
    )


def warm_reference(base: Path, header: str) -> None:
    """Read and parse the reference a header names into the cache, so that an analysis on the
    server's event loop finds it there and never waits for a disk or a parse."""
    try:
        path = (base / header).resolve()
    except (OSError, RuntimeError):
        return
    header_reference(path)


_REFERENCE_MAX_BYTES = 2_000_000


@lru_cache(maxsize=64)
def _file_info(path: str, mtime: float) -> ReferenceInfo | None:
    # A regular file of bounded size only: a header may name a FIFO or /dev/zero.
    try:
        data = read_regular(path, _REFERENCE_MAX_BYTES)
    except OSError:
        return None
    if binary_reason(data) is not None:
        return None
    root = grammars.parser("python").parse(data).root_node
    facts = python_facts.extract([root], data)
    return reference_info(facts, Resolver([root], facts))


def header_reference(path: Path) -> ReferenceInfo | None:
    """The reference a header names, read from disk (cached by modification time)."""
    try:
        mtime = path.stat().st_mtime
    except OSError:
        return None
    return _file_info(str(path), mtime)
