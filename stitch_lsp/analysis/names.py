"""What a name in a Python file stands for, resolved the way Python would bind it.

A candidate can hide `torch.matmul` behind `import torch as t`, `from torch import matmul as mm`,
`getattr(torch, "matmul")`, `op = torch.matmul`, a lambda, `functools.partial`, an attribute set
in `__init__`, a dict of functions, or a helper that receives the op as an argument. The checks
ask this module what a callee is (`Resolver.resolve`) and get a dotted path in the module
namespace (`torch.nn.functional.gelu`), or the function, lambda or class of this file it refers
to. Nothing is executed: only bindings that the source spells out with constants are followed,
and whatever cannot be known resolves to None.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from tree_sitter import Node

from stitch_lsp.analysis.python_facts import PyFacts, class_methods
from stitch_lsp.analysis.syntax import text

_MAX_DEPTH = 12
_SCOPES = frozenset({"function_definition", "lambda", "class_definition"})
# Statements whose blocks still bind names in the enclosing scope.
_COMPOUND = frozenset(
    {
        "if_statement",
        "elif_clause",
        "else_clause",
        "try_statement",
        "except_clause",
        "finally_clause",
        "with_statement",
        "for_statement",
        "while_statement",
        "block",
        "decorated_definition",
        "expression_statement",
        "match_statement",
    }
)


# Top-level statements whose blocks can bind module names the definitions query does not see.
_NESTING_STATEMENTS = frozenset(
    {"if_statement", "try_statement", "with_statement", "for_statement", "while_statement"}
)


@dataclass(frozen=True, slots=True)
class Ref:
    """What an expression denotes. Exactly one of `dotted`, `node` or `string` is set."""

    dotted: str | None = None  # a module-namespace path: "torch.nn.functional.gelu"
    node: Node | None = None  # a function_definition, lambda, class_definition or literal here
    instance: bool = False  # an instance of the class `node` / `dotted` (a call of it)
    string: str | None = None  # a constant string
    spelled: str | None = None  # `getattr(x, "relu")` of a value we cannot name: "x.relu"

    @property
    def name(self) -> str:
        if self.dotted is not None:
            return self.dotted
        if self.node is not None:
            if self.node.type == "lambda":
                return "a lambda"
            return text(self.node.child_by_field_name("name")) or self.node.type
        if self.spelled is not None:
            return self.spelled
        return repr(self.string)


@dataclass(frozen=True, slots=True)
class _Binding:
    at: int  # byte offset of the binding statement
    kind: str  # import | value | def | param | star | global
    payload: object  # dotted str, value Node, def Node, (fn, index, name)


def _string_value(node: Node) -> str | None:
    if node.type == "string":
        if any(c.type == "interpolation" for c in node.children):
            return None
        start = node.child(0)
        if start is not None and any(ch in text(start).lower() for ch in "fbt"):
            return None
        return "".join(text(c) for c in node.named_children if c.type == "string_content")
    if node.type == "concatenated_string":
        parts = [_string_value(c) for c in node.named_children]
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]
    return None


def _import_bindings(stmt: Node) -> Iterator[tuple[str, str, str]]:
    """(local name, dotted path, kind) for one import statement; kind is import or star."""
    if stmt.type == "import_statement":
        for child in stmt.named_children:
            if child.type == "dotted_name":
                full = text(child)
                yield full.split(".", 1)[0], full.split(".", 1)[0], "import"
            elif child.type == "aliased_import":
                name, alias = child.child_by_field_name("name"), child.child_by_field_name("alias")
                if name is not None and alias is not None:
                    yield text(alias), text(name), "import"
    elif stmt.type == "import_from_statement":
        module = stmt.child_by_field_name("module_name")
        if module is None or module.type != "dotted_name":
            return  # relative imports name this project's modules, not torch
        base = text(module)
        for child in stmt.named_children:
            if child == module:
                continue
            if child.type == "wildcard_import":
                yield "*", base, "star"
            elif child.type == "dotted_name":
                yield text(child), f"{base}.{text(child)}", "import"
            elif child.type == "aliased_import":
                name, alias = child.child_by_field_name("name"), child.child_by_field_name("alias")
                if name is not None and alias is not None:
                    yield text(alias), f"{base}.{text(name)}", "import"


def _targets(left: Node) -> list[Node]:
    """Identifiers bound by an assignment target (plain names; tuples element by element)."""
    if left.type == "identifier":
        return [left]
    if left.type in ("pattern_list", "tuple_pattern", "list_pattern"):
        return [c for c in left.named_children if c.type == "identifier"]
    return []


def param_nodes(fn: Node) -> list[tuple[str, Node | None]]:
    """(name, default value) of each parameter of a function or lambda, in order."""
    params = fn.child_by_field_name("parameters")
    out: list[tuple[str, Node | None]] = []
    if params is None:
        return out
    for p in params.named_children:
        if p.type == "identifier":
            out.append((text(p), None))
        elif p.type == "typed_parameter":
            ident = next((c for c in p.named_children if c.type == "identifier"), None)
            if ident is not None:
                out.append((text(ident), None))
        elif p.type in ("default_parameter", "typed_default_parameter"):
            out.append((text(p.child_by_field_name("name")), p.child_by_field_name("value")))
        elif p.type in ("list_splat_pattern", "dictionary_splat_pattern"):
            ident = next((c for c in p.named_children if c.type == "identifier"), None)
            if ident is not None:
                out.append(("*" + text(ident), None))
    return out


def _collect(body: Node, out: dict[str, list[_Binding]], fn: Node | None) -> None:
    """Bindings made directly in one scope's statements (not inside nested scopes)."""
    _collect_nodes(body.named_children, out, fn)


def _collect_nodes(nodes: list[Node], out: dict[str, list[_Binding]], fn: Node | None) -> None:
    stack = list(reversed(nodes))
    while stack:
        node = stack.pop()
        kind = node.type
        if kind in ("import_statement", "import_from_statement"):
            for name, dotted, how in _import_bindings(node):
                out.setdefault(name, []).append(_Binding(node.start_byte, how, dotted))
        elif kind == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None:
                for ident in _targets(left):
                    value = right if left.type == "identifier" else None
                    if value is not None and value.type == "assignment":  # a = b = value
                        inner = value
                        while inner.type == "assignment":
                            nxt = inner.child_by_field_name("right")
                            if nxt is None:
                                break
                            inner = nxt
                        value = inner
                    out.setdefault(text(ident), []).append(
                        _Binding(node.start_byte, "value", value)
                    )
                stack.append(right)
        elif kind == "named_expression":
            target, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if target is not None and value is not None:
                out.setdefault(text(target), []).append(_Binding(node.start_byte, "value", value))
        elif kind in ("function_definition", "class_definition"):
            defined = node.child_by_field_name("name")
            if defined is not None:
                out.setdefault(text(defined), []).append(_Binding(node.start_byte, "def", node))
        elif kind == "global_statement" and fn is not None:
            for ident in node.named_children:
                out.setdefault(text(ident), []).append(_Binding(node.start_byte, "global", None))
        elif kind in _COMPOUND or kind == "parenthesized_expression":
            stack.extend(reversed(node.named_children))


class Resolver:
    """Name resolution over one Python file. Scopes are read on first use and kept."""

    def __init__(self, roots: list[Node], facts: PyFacts | None = None) -> None:
        self._roots = roots
        self._facts = facts
        self._module: dict[str, list[_Binding]] | None = None
        self._locals: dict[int, dict[str, list[_Binding]]] = {}
        self._self_attrs: dict[int, dict[str, list[tuple[Node, Node]]]] = {}
        # Arguments seen at call sites of this file's functions: fn id -> param -> [(arg, caller)]
        self._args: dict[int, dict[str, list[tuple[Node, Node | None]]]] = {}
        self._memo: dict[int, Ref | None] = {}

    def forget(self) -> None:
        """Drop remembered answers: call arguments noted since may resolve parameters now."""
        self._memo.clear()

    # -- scopes -----------------------------------------------------------------------------
    def module_bindings(self) -> dict[str, list[_Binding]]:
        if self._module is None:
            out: dict[str, list[_Binding]] = {}
            if self._facts is None:
                for root in self._roots:
                    _collect(root, out, None)
            else:
                self._from_facts(self._facts, out)
            for binds in out.values():
                binds.sort(key=lambda b: b.at)
            self._module = out
        return self._module

    def _from_facts(self, facts: PyFacts, out: dict[str, list[_Binding]]) -> None:
        """Module bindings from the definitions query's facts, plus the statements it does not
        look into (imports and assignments under a top-level `try`, `if` or `with`)."""
        for node in facts.imports:
            for name, dotted, how in _import_bindings(node):
                out.setdefault(name, []).append(_Binding(node.start_byte, how, dotted))
        for name, values in facts.assignments.items():
            for value in values:
                names = [name]
                inner = value
                while inner.type == "assignment" and inner.child_by_field_name("right"):
                    left = inner.child_by_field_name("left")  # a = b = value binds b too
                    if left is not None and left.type == "identifier":
                        names.append(text(left))
                    inner = inner.child_by_field_name("right")  # type: ignore[assignment]
                for bound in names:
                    out.setdefault(bound, []).append(_Binding(value.start_byte, "value", inner))
        for name, fn in facts.functions.items():
            out.setdefault(name, []).append(_Binding(fn.start_byte, "def", fn))
        for cls in facts.classes:
            out.setdefault(cls.name, []).append(_Binding(cls.node.start_byte, "def", cls.node))
        nested = [
            child
            for root in self._roots
            for child in root.named_children
            if child.type in _NESTING_STATEMENTS
        ]
        if nested:
            _collect_nodes(nested, out, None)

    def module_aliases(self) -> dict[str, str]:
        """Module-level names bound by imports: local name -> dotted path."""
        return {
            name: str(b.payload)
            for name, binds in self.module_bindings().items()
            if name != "*"
            for b in binds
            if b.kind == "import"
        }

    def _local_bindings(self, fn: Node) -> dict[str, list[_Binding]]:
        found = self._locals.get(fn.id)
        if found is None:
            found = {}
            for i, (name, default) in enumerate(param_nodes(fn)):
                found.setdefault(name.lstrip("*"), []).append(
                    _Binding(fn.start_byte, "param", (fn, i, name, default))
                )
            body = fn.child_by_field_name("body")
            if body is not None:
                if fn.type == "lambda":
                    _collect_lambda(body, found)
                else:
                    _collect(body, found, fn)
            self._locals[fn.id] = found
        return found

    def note_call_arguments(self, target: Node, call: Node, caller: Node | None) -> None:
        """Remember what a call passes to a function of this file, so its parameters resolve
        (a helper that receives `torch.relu` as `fallback`)."""
        args = call.child_by_field_name("arguments")
        if args is None or args.type != "argument_list":
            return
        params = [p for p, _ in param_nodes(target)]
        offset = 0
        if target.type == "function_definition" and params and params[0] in ("self", "cls"):
            fn_node = call.child_by_field_name("function")
            if fn_node is not None and fn_node.type == "attribute":
                offset = 1  # a bound method: `self` is not among the arguments
        table = self._args.setdefault(target.id, {})
        positional = 0
        for arg in args.named_children:
            if arg.type == "keyword_argument":
                name, value = arg.child_by_field_name("name"), arg.child_by_field_name("value")
                if name is not None and value is not None:
                    table.setdefault(text(name), []).append((value, caller))
            elif arg.type in ("list_splat", "dictionary_splat", "comment"):
                continue
            else:
                i = positional + offset
                if i < len(params) and not params[i].startswith("*"):
                    table.setdefault(params[i], []).append((arg, caller))
                positional += 1

    @staticmethod
    def scope_of(node: Node) -> Node | None:
        """The innermost function or lambda around `node` (None at module level)."""
        parent = node.parent
        while parent is not None:
            if parent.type in ("function_definition", "lambda"):
                return parent
            parent = parent.parent
        return None

    @staticmethod
    def class_of(fn: Node) -> Node | None:
        parent = fn.parent
        while parent is not None and parent.type in ("decorated_definition", "block"):
            parent = parent.parent
        return parent if parent is not None and parent.type == "class_definition" else None

    # -- resolution -------------------------------------------------------------------------
    def resolve(self, node: Node | None, depth: int = 0) -> Ref | None:
        """What `node` (an expression) stands for, or None when the source does not say."""
        if node is None or depth > _MAX_DEPTH:
            return None
        if depth == 0:
            if node.id in self._memo:
                return self._memo[node.id]
            found = self._resolve(node, 0)
            self._memo[node.id] = found
            return found
        return self._resolve(node, depth)

    def _resolve(self, node: Node, depth: int) -> Ref | None:
        kind = node.type
        if kind == "identifier":
            return self._name(text(node), node, depth)
        if kind == "attribute":
            return self._attribute(node, depth)
        if kind == "call":
            return self._call(node, depth)
        if kind == "subscript":
            return self._subscript(node, depth)
        if kind in ("string", "concatenated_string"):
            value = _string_value(node)
            return Ref(string=value) if value is not None else None
        if kind == "binary_operator":
            op = node.child_by_field_name("operator")
            if op is not None and op.type == "+":
                left = self.resolve(node.child_by_field_name("left"), depth + 1)
                right = self.resolve(node.child_by_field_name("right"), depth + 1)
                if left and right and left.string is not None and right.string is not None:
                    return Ref(string=left.string + right.string)
            return None
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.resolve(node.named_children[0], depth + 1)
        if kind in ("lambda", "dictionary", "list", "tuple"):
            return Ref(node=node)
        if kind == "conditional_expression":
            for child in node.named_children[:1] + node.named_children[2:3]:
                found = self.resolve(child, depth + 1)
                if found is not None:
                    return found
            return None
        if kind in ("named_expression",):
            return self.resolve(node.child_by_field_name("value"), depth + 1)
        return None

    def string(self, node: Node | None) -> str | None:
        found = self.resolve(node)
        return found.string if found is not None else None

    def dotted(self, node: Node | None) -> str | None:
        found = self.resolve(node)
        return found.dotted if found is not None else None

    def _name(self, name: str, use: Node, depth: int) -> Ref | None:
        scope = self.scope_of(use)
        while scope is not None:
            binds = self._local_bindings(scope).get(name)
            if binds:
                if any(b.kind == "global" for b in binds):
                    break
                return self._first(binds, use, depth)
            scope = self.scope_of(scope)
        binds = self.module_bindings().get(name)
        if binds:
            found = self._first(binds, use, depth)
            if found is not None:
                return found
        star = self.module_bindings().get("*")
        if star:
            # `from torch.nn.functional import *`: a free name may come from there.
            return Ref(dotted=f"{star[-1].payload}.{name}")
        if binds:
            return None
        return Ref(dotted=name)  # a builtin, or a name bound where we cannot see

    def _first(self, binds: list[_Binding], use: Node, depth: int) -> Ref | None:
        """The most recent binding before `use` that resolves; then the later ones."""
        before = [b for b in binds if b.at < use.start_byte]
        after = [b for b in binds if b.at >= use.start_byte]
        for b in [*reversed(before), *after]:
            found = self._binding(b, depth)
            if found is not None:
                return found
        return None

    def _binding(self, b: _Binding, depth: int) -> Ref | None:
        if b.kind in ("import", "star"):
            return Ref(dotted=str(b.payload))
        if b.kind == "def":
            return Ref(node=b.payload)  # type: ignore[arg-type]
        if b.kind == "value":
            value = b.payload
            if value is None or not isinstance(value, Node):
                return None
            return self.resolve(value, depth + 1)
        if b.kind == "param":
            assert isinstance(b.payload, tuple)
            fn: Node = b.payload[0]
            name: str = b.payload[2]
            default: Node | None = b.payload[3]
            for arg, _caller in self._args.get(fn.id, {}).get(name, []):
                found = self.resolve(arg, depth + 1)
                if found is not None:
                    return found
            if default is not None:
                return self.resolve(default, depth + 1)
            return None
        return None

    def _attribute(self, node: Node, depth: int) -> Ref | None:
        obj = node.child_by_field_name("object")
        attr = text(node.child_by_field_name("attribute"))
        if obj is None:
            return None
        if obj.type == "identifier" and text(obj) in ("self", "cls"):
            found = self._self_attribute(node, attr, depth)
            if found is not None:
                return found
        base = self.resolve(obj, depth + 1)
        return self._member(base, attr, depth)

    def _member(self, base: Ref | None, attr: str, depth: int) -> Ref | None:
        if base is None:
            return None
        if base.dotted is not None:
            # `torch.empty(n).relu_` -> "torch.empty().relu_": a method of what a call returned.
            return Ref(dotted=f"{base.dotted}{'()' if base.instance else ''}.{attr}")
        if base.node is not None and base.node.type == "class_definition":
            member = class_member(base.node, attr)
            if member is not None:
                if member.type in ("function_definition", "class_definition"):
                    return Ref(node=member)
                return self.resolve(member, depth + 1)
        return None

    def _self_attribute(self, node: Node, attr: str, depth: int) -> Ref | None:
        fn = self.scope_of(node)
        while fn is not None and fn.type == "lambda":
            fn = self.scope_of(fn)
        cls = self.class_of(fn) if fn is not None else None
        if cls is None:
            return None
        member = class_member(cls, attr)
        if member is not None and member.type in ("function_definition", "class_definition"):
            return Ref(node=member)
        values = self._attrs_of(cls).get(attr, [])
        for value, _ in reversed(values):
            found = self.resolve(value, depth + 1)
            if found is not None:
                return found
        if member is not None:
            return self.resolve(member, depth + 1)
        return None

    def _attrs_of(self, cls: Node) -> dict[str, list[tuple[Node, Node]]]:
        """`self.x = value` anywhere in the class's methods: x -> [(value, method)]."""
        found = self._self_attrs.get(cls.id)
        if found is None:
            found = {}
            for method in class_methods(cls).values():
                stack = [method.child_by_field_name("body")]
                while stack:
                    n = stack.pop()
                    if n is None or n.type in _SCOPES:
                        continue
                    if n.type == "assignment":
                        left, right = n.child_by_field_name("left"), n.child_by_field_name("right")
                        if (
                            left is not None
                            and right is not None
                            and left.type == "attribute"
                            and text(left.child_by_field_name("object")) == "self"
                        ):
                            attr = text(left.child_by_field_name("attribute"))
                            found.setdefault(attr, []).append((right, method))
                    stack.extend(n.named_children)
            self._self_attrs[cls.id] = found
        return found

    def self_attribute_values(self, cls: Node) -> dict[str, list[tuple[Node, Node]]]:
        return self._attrs_of(cls)

    def _call(self, node: Node, depth: int) -> Ref | None:
        fn = node.child_by_field_name("function")
        args = node.child_by_field_name("arguments")
        callee = self.resolve(fn, depth + 1)
        if callee is None:
            return None
        positional = (
            [a for a in args.named_children if a.type not in ("keyword_argument", "comment")]
            if args is not None and args.type == "argument_list"
            else []
        )
        if callee.dotted is not None:
            d = callee.dotted
            if d in ("getattr", "builtins.getattr") and len(positional) >= 2:
                name = self.string(positional[1])
                if name is None:
                    return None
                base = self.resolve(positional[0], depth + 1)
                if base is None:  # getattr(x, "data_ptr") on a tensor: spelled out, at least
                    return Ref(spelled=f"{text(positional[0])}.{name}")
                return self._member(base, name, depth)
            if d in ("functools.partial", "functools.partialmethod") and positional:
                return self.resolve(positional[0], depth + 1)
            if d in ("importlib.import_module", "__import__", "builtins.__import__"):
                name = self.string(positional[0]) if positional else None
                if name is None:
                    return None
                if d.endswith("__import__"):
                    return Ref(dotted=name.split(".", 1)[0])
                return Ref(dotted=name)
            if d in ("vars", "builtins.vars") and positional:
                return self.resolve(positional[0], depth + 1)  # vars(m)["x"] is m.x
            if d in ("globals", "builtins.globals"):
                return Ref(dotted="<globals>")
            return Ref(dotted=d, instance=True)
        if callee.node is not None:
            if callee.node.type == "class_definition":
                return Ref(node=callee.node, instance=True)
            if callee.node.type == "function_definition":
                return self._returned(callee.node, depth)
        return None

    def _returned(self, fn: Node, depth: int) -> Ref | None:
        """What a function of this file returns, when a return statement names it."""
        stack = [fn.child_by_field_name("body")]
        while stack:
            n = stack.pop()
            if n is None or n.type in _SCOPES:
                continue
            if n.type == "return_statement" and n.named_children:
                found = self.resolve(n.named_children[0], depth + 1)
                if found is not None:
                    return found
            stack.extend(n.named_children)
        return None

    def _subscript(self, node: Node, depth: int) -> Ref | None:
        value = node.child_by_field_name("value")
        key_node = node.child_by_field_name("subscript")
        if value is None or key_node is None:
            return None
        if value.type == "attribute" and text(value.child_by_field_name("attribute")) == "__dict__":
            value = value.child_by_field_name("object")
        base = self.resolve(value, depth + 1)
        if base is None:
            return None
        key = self.resolve(key_node, depth + 1)
        if base.dotted == "<globals>" and key is not None and key.string is not None:
            return self._name(key.string, node, depth + 1)
        if base.dotted == "sys.modules" and key is not None and key.string is not None:
            return Ref(dotted=key.string)
        if base.dotted is not None and key is not None and key.string is not None:
            return Ref(dotted=f"{base.dotted}.{key.string}")
        if base.node is not None and base.node.type == "dictionary" and key is not None:
            for pair in base.node.named_children:
                if pair.type != "pair":
                    continue
                k = self.resolve(pair.child_by_field_name("key"), depth + 1)
                if k is not None and k == key:
                    return self.resolve(pair.child_by_field_name("value"), depth + 1)
        if (
            base.node is not None
            and base.node.type in ("list", "tuple")
            and key_node.type == "integer"
        ):
            items = [c for c in base.node.named_children if c.type != "comment"]
            i = int(text(key_node), 0)
            if -len(items) <= i < len(items):
                return self.resolve(items[i], depth + 1)
        return None


def _collect_lambda(body: Node, out: dict[str, list[_Binding]]) -> None:
    stack = [body]
    while stack:
        node = stack.pop()
        if node.type == "named_expression":
            name, value = node.child_by_field_name("name"), node.child_by_field_name("value")
            if name is not None and value is not None:
                out.setdefault(text(name), []).append(_Binding(node.start_byte, "value", value))
        if node.type not in _SCOPES:
            stack.extend(node.named_children)


def class_member(cls: Node, name: str) -> Node | None:
    """A method, nested class or class-level value named `name` in a class body."""
    body = cls.child_by_field_name("body")
    if body is None:
        return None
    found = None
    for child in body.named_children:
        node = child
        if child.type == "decorated_definition":
            node = child.child_by_field_name("definition") or child
        if node.type in ("function_definition", "class_definition"):
            if text(node.child_by_field_name("name")) == name:
                found = node
        elif node.type == "expression_statement" and node.named_children:
            assign = node.named_children[0]
            if assign.type == "assignment":
                left = assign.child_by_field_name("left")
                if left is not None and left.type == "identifier" and text(left) == name:
                    found = assign.child_by_field_name("right")
    return found
