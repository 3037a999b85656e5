"""Facts about one Python file: nn.Module classes, functions, CUDA-building calls and the
CUDA strings they carry."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.syntax import text

# Callee spellings that are torch's cpp_extension.load (files), not json/pickle/torch.load.
_TORCH_LOAD = re.compile(r"^(torch\.utils\.)?cpp_extension\.load$")


class PyClass:
    """A module-level class. Its methods are read on first use: most classes of a large file
    are only ever asked for their name and bases."""

    __slots__ = ("_methods", "bases", "name", "node")

    def __init__(self, name: str, node: Node, bases: list[str]) -> None:
        self.name = name
        self.node = node  # class_definition
        self.bases = bases
        self._methods: dict[str, Node] | None = None

    @property
    def methods(self) -> dict[str, Node]:
        """name -> function_definition, in source order."""
        if self._methods is None:
            self._methods = class_methods(self.node)
        return self._methods


@dataclass(slots=True)
class LoadCall:
    node: Node
    callee: str
    kind: str  # load_inline | load | load_cuda
    args: Node  # argument_list

    def argument(self, keyword: str, position: int | None) -> Node | None:
        positional = 0
        for child in self.args.named_children:
            if child.type == "keyword_argument":
                name = child.child_by_field_name("name")
                if text(name) == keyword:
                    return child.child_by_field_name("value")
            elif child.type in ("list_splat", "dictionary_splat", "comment"):
                continue
            else:
                if position is not None and positional == position:
                    return child
                positional += 1
        return None

    def keywords(self) -> dict[str, Node]:
        out: dict[str, Node] = {}
        for child in self.args.named_children:
            if child.type == "keyword_argument":
                value = child.child_by_field_name("value")
                if value is not None:
                    out[text(child.child_by_field_name("name"))] = value
        return out


@dataclass(slots=True)
class PyFacts:
    classes: list[PyClass] = field(default_factory=list)
    functions: dict[str, Node] = field(default_factory=dict)
    assignments: dict[str, list[Node]] = field(default_factory=dict)  # name -> value nodes
    load_calls: list[LoadCall] = field(default_factory=list)
    torch_load_imported: bool = False  # `from torch.utils.cpp_extension import load`
    imports: list[Node] = field(default_factory=list)
    _by_name: dict[str, PyClass] | None = None

    def resolve(self, ident: Node) -> Node | None:
        """The value last assigned to a module-level name before `ident` (or anywhere)."""
        values = self.assignments.get(text(ident))
        if not values:
            return None
        before = [v for v in values if v.start_byte < ident.start_byte]
        return (before or values)[-1]

    def cls(self, name: str) -> PyClass | None:
        """The class a module-level name ends up bound to (the last definition wins)."""
        if self._by_name is None:
            self._by_name = {c.name: c for c in self.classes}
        return self._by_name.get(name)


_BASE = re.compile(r"^\s*([A-Za-z_][\w.]*)\s*$")


def _bases(superclasses: Node | None) -> list[str]:
    """Base class names from `(nn.Module, Mixin, metaclass=M)`; keywords are not bases."""
    if superclasses is None:
        return []
    inner = text(superclasses)[1:-1]
    if "(" in inner or "#" in inner:  # calls or comments inside: read the nodes
        return [
            text(b) for b in superclasses.named_children if b.type in ("identifier", "attribute")
        ]
    return [m.group(1) for part in inner.split(",") if (m := _BASE.match(part))]


def class_methods(cls: Node) -> dict[str, Node]:
    """A class body's functions by name, decorated ones included."""
    body = cls.child_by_field_name("body")
    out: dict[str, Node] = {}
    if body is None:
        return out
    for child in body.named_children:
        fn = child
        if child.type == "decorated_definition":
            fn = child.child_by_field_name("definition") or child
        if fn.type == "function_definition":
            out[text(fn.child_by_field_name("name"))] = fn
    return out


# Where a CUDA-building call can be; the load_calls query confirms each hit.
_LOAD_HINTS = (b"load", b"build_cuda")


def extract(roots: list[Node], data: bytes) -> PyFacts:
    """Module-level facts of a file given as the roots of its statement runs, in order."""
    facts = PyFacts()
    found = [m for root in roots for m in grammars.matches("python", "definitions", root, 1)]
    for _, cap in found:
        if "class" in cap:
            sup = cap.get("class.bases")
            facts.classes.append(
                PyClass(
                    text(cap["class.name"][0]), cap["class"][0], _bases(sup[0] if sup else None)
                )
            )
        elif "function" in cap:
            facts.functions[text(cap["function.name"][0])] = cap["function"][0]
        elif "assign.name" in cap:
            name = text(cap["assign.name"][0])
            facts.assignments.setdefault(name, []).append(cap["assign.value"][0])
        elif "import" in cap:
            node = cap["import"][0]
            facts.imports.append(node)
            t = text(node)
            if "cpp_extension" in t and re.search(r"\bload\b(?!_)", t):
                facts.torch_load_imported = True
    # A cursor yields matches in document order, so classes and assignments are in order.

    hits = grammars.find_all(data, _LOAD_HINTS)
    statements = grammars.statements_at(roots, hits) if hits else []
    matched = [m for node in statements for m in grammars.matches("python", "load_calls", node)]
    for _, cap in matched:
        callee = text(cap["fn"][0])
        kind = text(cap["fn.name"][0])
        if kind == "load" and not (
            _TORCH_LOAD.match(callee) or (callee == "load" and facts.torch_load_imported)
        ):
            continue
        if kind == "build_cuda":
            kind = "load_cuda"
        facts.load_calls.append(LoadCall(cap["call"][0], callee, kind, cap["args"][0]))
    facts.load_calls.sort(key=lambda c: c.node.start_byte)
    return facts


def is_module_class(cls: PyClass, module_names: set[str]) -> bool:
    for base in cls.bases:
        last = base.rsplit(".", 1)[-1]
        if last == "Module" or base.startswith(("nn.", "torch.nn.")) or base in module_names:
            return True
    return False


def module_classes(facts: PyFacts) -> list[PyClass]:
    """nn.Module subclasses, including subclasses of other module classes in the file."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for cls in facts.classes:
            if cls.name not in found and is_module_class(cls, found):
                found.add(cls.name)
                changed = True
    return [c for c in facts.classes if c.name in found]


def param_names(fn: Node) -> list[str]:
    """Parameter names as written, with * and ** kept for varargs."""
    params = fn.child_by_field_name("parameters")
    out: list[str] = []
    if params is None:
        return out
    for p in params.named_children:
        if p.type == "identifier":
            out.append(text(p))
        elif p.type in ("typed_parameter",):
            ident = next((c for c in p.named_children if c.type == "identifier"), None)
            out.append(text(ident) if ident is not None else text(p))
        elif p.type in ("default_parameter", "typed_default_parameter"):
            out.append(text(p.child_by_field_name("name")))
        elif p.type == "list_splat_pattern":
            out.append("*" + text(p.named_children[0]) if p.named_children else "*")
        elif p.type == "dictionary_splat_pattern":
            out.append("**" + text(p.named_children[0]) if p.named_children else "**")
        elif p.type in ("typed_parameter",):
            out.append(text(p))
    return out
