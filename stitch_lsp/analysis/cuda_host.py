"""What the host side of an extension does: the C++ wrapper that Python calls, or an
`extern "C"` launcher.

A wrapper can cheat without any kernel noticing: return its input, return `torch::empty` that
no kernel writes, zero the input, catch a kernel's failure and call ATen instead, keep results
in a `static` between calls, or copy the data to the CPU and loop over it there. These facts
are read once per source text, from the tree, by the `host` query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tree_sitter import Node

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.syntax import text
from stitch_lsp.analysis.torch_ops import HEAVY_OPS, LIGHT_OPS

Span = tuple[int, int]

_ALLOC = re.compile(
    r"^(?:(?:torch|at)::)?(empty|empty_like|empty_strided|zeros|zeros_like|ones|ones_like|full"
    r"|full_like)$"
)
# Methods that hand back (a view of) the same tensor, so the result still is the input.
_ALIAS_METHODS = frozenset(
    {"contiguous", "view", "reshape", "flatten", "squeeze", "unsqueeze", "view_as", "expand",
     "detach", "t", "transpose", "permute", "narrow", "select", "as_strided"}
)  # fmt: skip
_NOT_MUTATIONS = frozenset({"requires_grad_", "share_memory_", "retain_grad", "set_requires_grad"})
_MEM_WRITES = re.compile(r"^(cudaMemset\w*|cudaMemcpy\w*|cuMemset\w*|memset|memcpy)$")
# Tensor methods that are also common names elsewhere; a C++ method call by these names is not
# necessarily ATen compute.
_AMBIGUOUS = frozenset(
    [
        "max",
        "min",
        "add",
        "sort",
        "round",
        "pow",
        "abs",
        "sum",
        "sub",
        "mul",
        "div",
        "where",
        "norm",
        "sign",
        "exp",
        "log",
        "sqrt",
        "floor",
        "ceil",
    ]
)
# Host code that works on CPU memory: torch::kCPU, cudaMemcpyDeviceToHost, Device("cpu").
_CPU_NEEDLES = (b"kCPU", b"cudaMemcpyDeviceToHost", b'"cpu"')
_CALL_OR_NOT = frozenset(
    {"call_expression", "comment", "string_literal", "raw_string_literal", "translation_unit"}
)
_CASTS = re.compile(r"^(reinterpret_cast|static_cast|const_cast|c10::cuda::\w+)\b")


@dataclass(slots=True)
class HostFacts:
    """One host function (a torch wrapper or an `extern "C"` launcher)."""

    params: list[str] = field(default_factory=list)  # parameter names, in order
    tensor_params: set[str] = field(default_factory=set)
    returns: list[tuple[Span, str | None, str | None]] = field(default_factory=list)
    allocs: dict[str, tuple[str, Span]] = field(default_factory=dict)  # local -> (ctor, span)
    aliases: dict[str, str] = field(default_factory=dict)  # local -> the name it views
    passed: set[str] = field(default_factory=set)  # names handed to some call
    mutations: list[tuple[str, str, Span]] = field(default_factory=list)  # (name, how, span)
    catches: list[tuple[Span, bool]] = field(default_factory=list)  # (span, returns a value)
    statics: list[tuple[str, str, Span]] = field(default_factory=list)  # (name, type, span)
    compares: list[tuple[set[str], Span]] = field(default_factory=list)  # names on each side
    cpu: list[tuple[Span, str]] = field(default_factory=list)
    # Calls other than launches: (callee as written, the variable of each argument).
    calls: list[tuple[str, list[str | None]]] = field(default_factory=list)

    def shifted(self, delta: int) -> HostFacts:
        """The same facts for the function moved by `delta` bytes in its source."""
        if delta == 0:
            return self

        def m(span: Span) -> Span:
            return span[0] + delta, span[1] + delta

        return HostFacts(
            params=self.params,
            tensor_params=self.tensor_params,
            returns=[(m(sp), root, ctor) for sp, root, ctor in self.returns],
            allocs={k: (ctor, m(sp)) for k, (ctor, sp) in self.allocs.items()},
            aliases=self.aliases,
            passed=self.passed,
            mutations=[(n, how, m(sp)) for n, how, sp in self.mutations],
            catches=[(m(sp), r) for sp, r in self.catches],
            statics=[(n, t, m(sp)) for n, t, sp in self.statics],
            compares=[(sides, m(sp)) for sides, sp in self.compares],
            cpu=[(m(sp), w) for sp, w in self.cpu],
            calls=self.calls,
        )

    def origin(self, name: str | None) -> str | None:
        """Follow `auto xc = x.contiguous();` back to `x`."""
        seen = 0
        while name is not None and name in self.aliases and seen < 8:
            name = self.aliases[name]
            seen += 1
        return name


def root_name(expr: Node | None) -> str | None:
    """The variable an expression is about: `x.data_ptr<float>()`, `(float*)x`, `x[i]`,
    `reinterpret_cast<float*>(x.data_ptr())` -> `x`."""
    node = expr
    for _ in range(16):
        if node is None:
            return None
        kind = node.type
        if kind == "identifier":
            return text(node)
        if kind == "field_expression":
            node = node.child_by_field_name("argument")
        elif kind == "call_expression":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if fn is not None and fn.type == "field_expression":
                node = fn.child_by_field_name("argument")
            elif fn is not None and _CASTS.match(text(fn)) and args is not None:
                node = args.named_children[0] if args.named_children else None
            else:
                return None
        elif kind in ("subscript_expression", "pointer_expression", "unary_expression"):
            node = node.child_by_field_name("argument")
        elif kind == "cast_expression":
            node = node.child_by_field_name("value")
        elif kind == "parenthesized_expression":
            node = node.named_children[0] if node.named_children else None
        else:
            return None
    return None


def _method(call: Node) -> tuple[Node | None, str]:
    """(receiver, method name) of `x.zero_()` / `x.data_ptr<float>()`."""
    fn = call.child_by_field_name("function")
    if fn is None or fn.type != "field_expression":
        return None, ""
    field_node = fn.child_by_field_name("field")
    if field_node is not None and field_node.type == "template_method":
        field_node = field_node.child_by_field_name("name")
    return fn.child_by_field_name("argument"), text(field_node)


def _param_names(declarator: Node) -> list[tuple[str, str]]:
    node: Node | None = declarator
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    plist = node.child_by_field_name("parameters") if node is not None else None
    out: list[tuple[str, str]] = []
    if plist is None:
        return out
    for p in plist.named_children:
        if p.type not in ("parameter_declaration", "optional_parameter_declaration"):
            continue
        decl = p.child_by_field_name("declarator")
        while decl is not None and decl.type != "identifier":
            inner = decl.child_by_field_name("declarator")
            if inner is None:
                inner = next((c for c in decl.named_children if c.type == "identifier"), None)
            decl = inner
        if decl is not None:
            out.append((text(decl), text(p.child_by_field_name("type"))))
    return out


def host_facts(fn: Node, declarator: Node, body: Node) -> HostFacts:
    out = HostFacts()
    for name, type_text in _param_names(declarator):
        out.params.append(name)
        if "Tensor" in type_text:
            out.tensor_params.add(name)
    found = grammars.captures("cuda", "host", body)
    for node in found.get("return.value", []):
        out.returns.append(((node.start_byte, node.end_byte), root_name(node), _alloc_ctor(node)))
        if node.type == "initializer_list":  # return {a, b};
            for item in node.named_children:
                out.returns.append(
                    ((item.start_byte, item.end_byte), root_name(item), _alloc_ctor(item))
                )
    for init in found.get("init", []):
        name_node = init.child_by_field_name("declarator")
        value = init.child_by_field_name("value")
        if name_node is None or value is None or name_node.type != "identifier":
            continue
        name = text(name_node)
        ctor = _alloc_ctor(value)
        if ctor is not None:
            out.allocs[name] = (ctor, (init.start_byte, init.end_byte))
        else:
            source = _aliased(value)
            if source is not None:
                out.aliases[name] = source
    for call in found.get("call", []):
        receiver, method = _method(call)
        args_node = call.child_by_field_name("arguments")
        arg_nodes = args_node.named_children if args_node is not None else []
        roots = [root_name(a) for a in arg_nodes]
        for arg, passed in zip(arg_nodes, roots, strict=True):
            if passed is not None:
                out.passed.add(passed)  # everything handed to a call may be written by it
            elif arg.type == "lambda_expression":  # AT_DISPATCH_...([&] { ... })
                out.passed.add("*")
        if receiver is None and not any(c.type == "kernel_call_syntax" for c in call.children):
            out.calls.append((text(call.child_by_field_name("function")), roots))
        if receiver is not None:
            target = root_name(receiver)
            if (
                target is not None
                and method.endswith("_")
                and not method.startswith("_")
                and method not in _NOT_MUTATIONS
            ):
                out.mutations.append((target, f"{method}()", (call.start_byte, call.end_byte)))
            if method == "cpu" or method == "accessor":
                out.cpu.append(((call.start_byte, call.end_byte), f".{method}()"))
            continue
        callee_node = call.child_by_field_name("function")
        first = args_node.named_children[0] if args_node and args_node.named_children else None
        called = text(callee_node).rsplit("::", 1)[-1]
        if _MEM_WRITES.match(called) or (called.endswith("_") and "::" in text(callee_node)):
            target = root_name(first)
            if target is not None:
                out.mutations.append((target, f"{called}(...)", (call.start_byte, call.end_byte)))
    data = body.text or b""
    for needle in _CPU_NEEDLES:
        at = data.find(needle)
        while at != -1:
            inner = body.start_byte + at + (1 if needle.startswith(b'"') else 0)
            hit = body.descendant_for_byte_range(inner, inner + 1)
            if hit is not None and hit.type in ("identifier", "string_content"):
                out.cpu.append(((hit.start_byte, hit.end_byte), text(hit)))
            at = data.find(needle, at + len(needle))
    for clause in found.get("catch", []):
        body_node = clause.child_by_field_name("body")
        returns = body_node is not None and any(
            r.named_children for r in grammars.captures("cuda", "host", body_node).get("return", [])
        )
        out.catches.append(((clause.start_byte, clause.end_byte), returns))
    for decl in found.get("static", []):
        type_node = decl.child_by_field_name("type")
        for d in decl.children_by_field_name("declarator"):
            name_node = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
            pointer = False
            while name_node is not None and name_node.type != "identifier":
                if name_node.type == "pointer_declarator":
                    pointer = True
                name_node = name_node.child_by_field_name("declarator")
            if name_node is not None:
                kw = next(
                    (text(c) for c in decl.children if c.type == "storage_class_specifier"),
                    "static",
                )
                shown = f"{kw} {text(type_node)}" + ("*" if pointer else "")
                out.statics.append((text(name_node), shown, (decl.start_byte, decl.end_byte)))
    for cmp in found.get("compare", []):
        sides = {
            n
            for n in (
                root_name(cmp.child_by_field_name("left")),
                root_name(cmp.child_by_field_name("right")),
            )
            if n is not None
        }
        out.compares.append((sides, (cmp.start_byte, cmp.end_byte)))
    return out


def _alloc_ctor(node: Node) -> str | None:
    if node.type != "call_expression":
        return None
    fn = node.child_by_field_name("function")
    if fn is None:
        return None
    name = text(fn)
    return name if _ALLOC.match(name) else None


def _aliased(value: Node) -> str | None:
    """`x`, `x.contiguous()`, `x.view(...)`: the name whose storage `value` shares."""
    if value.type == "identifier":
        return text(value)
    if value.type == "call_expression":
        receiver, method = _method(value)
        if receiver is not None and method in _ALIAS_METHODS:
            return root_name(receiver)
    return None


# -- ATen compute called from C++ -----------------------------------------------------------

_QUALIFIED = re.compile(rb"\b([A-Za-z_]\w*)::((?:\w+::)*)(\w+)\s*(?:<[^<>;(]*>\s*)?\(")
_UNQUALIFIED = re.compile(rb"(?<![\w.:>])([a-z_]\w*)\s*\(")
_METHOD = re.compile(rb"(?:\.|->)\s*([a-z_]\w*)\s*\(")
_NS_ALIAS = re.compile(rb"namespace\s+(\w+)\s*=\s*((?:::)?\w+(?:::\w+)*)\s*;")
_USING_NS = re.compile(rb"using\s+namespace\s+((?:\w+::)*\w+)\s*;")
_USING_NAME = re.compile(rb"using\s+(?:torch|at)((?:::\w+)*)::(\w+)\s*;")


def _op_name(name: str) -> str | None:
    if name.endswith("_") and not name.startswith("_") and name[:-1] in HEAVY_OPS | LIGHT_OPS:
        name = name[:-1]
    return name if name in HEAVY_OPS or name in LIGHT_OPS else None


def aten_calls(
    root: Node, data: bytes, host_spans: list[Span], defined_names: set[str]
) -> list[tuple[int, int, str, str]]:
    """(start, end, op, as written) of each ATen/torch compute call: `torch::matmul(...)`,
    `at::relu(...)`, a namespace alias (`namespace T = torch; T::softmax`), a name brought in
    by `using namespace at;` / `using at::mm;`, or a tensor method (`x.matmul(w)`) in host
    code. Names the source defines itself (its own functions) are not ATen."""
    torchy = {"torch", "at"}
    for m in _NS_ALIAS.finditer(data):
        target = m.group(2).decode().lstrip(":")
        if target.split("::", 1)[0] in torchy:
            torchy.add(m.group(1).decode())
    using = any(m.group(1).decode().split("::", 1)[0] in torchy for m in _USING_NS.finditer(data))
    used_names = {m.group(2).decode() for m in _USING_NAME.finditer(data)}
    out: list[tuple[int, int, str, str]] = []

    def in_host(at: int) -> bool:
        return any(a <= at < b for a, b in host_spans)

    def confirmed(at: int, end: int) -> bool:
        node = root.descendant_for_byte_range(at, end)
        while node is not None and node.type not in _CALL_OR_NOT:
            node = node.parent
        return node is not None and node.type == "call_expression"

    for m in _QUALIFIED.finditer(data):
        ns = m.group(1).decode()
        if ns not in torchy:
            continue
        middle = m.group(2).decode()
        name = m.group(3).decode()
        if name in ("call", "redispatch") and middle:
            name = middle.rstrip(":").rsplit("::", 1)[-1]  # at::_ops::mm::call(...)
        if middle.startswith(("cuda::", "native::cuda")) or "blas" in middle:
            continue  # at::cuda::blas::gemm is the vendor library
        op = _op_name(name)
        if op is not None and confirmed(m.start(3), m.end(3)):
            shown = data[m.start() : m.end(3)].decode()
            out.append((m.start(), m.end(3), op, shown))
    if using or used_names:
        for m in _UNQUALIFIED.finditer(data):
            name = m.group(1).decode()
            if name in defined_names or not (using or name in used_names):
                continue
            op = _op_name(name)
            if op is not None and in_host(m.start()) and confirmed(m.start(1), m.end(1)):
                out.append((m.start(1), m.end(1), op, name))  # `using namespace at;` relu(...)
    for m in _METHOD.finditer(data):
        name = m.group(1).decode()
        op = _op_name(name)
        if op is None or (name in _AMBIGUOUS) or not in_host(m.start()):
            continue
        if confirmed(m.start(1), m.end(1)):
            out.append((m.start(1), m.end(1), op, f".{name}()"))
    out.sort()
    return out
