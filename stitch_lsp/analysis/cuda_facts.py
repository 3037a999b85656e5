"""Facts about one CUDA/C++ source: kernels, device functions, launches, and what they use.

Positions are byte spans of the source that was parsed (a `.cu` file, or the virtual text of a
CUDA string). The caller maps them to document ranges. Facts of a CUDA string are cached by
its text, so editing Python code elsewhere in a file never re-parses its CUDA.
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from tree_sitter import Node, Tree

from stitch_lsp import cuda_macros
from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.cuda_host import HostFacts, aten_calls, host_facts, root_name
from stitch_lsp.analysis.cuda_kernels import Branch, KernelUse, branches, dead_reason, kernel_use
from stitch_lsp.analysis.syntax import ancestors, collapse, first_error, text
from stitch_lsp.analysis.text_index import LineIndex

Span = tuple[int, int]  # byte offsets in the parsed source

# What counts as checking a launch for errors in the statements that follow it.
_ERROR_CHECK = re.compile(
    r"GetLastError|PeekAtLastError|KERNEL_LAUNCH_CHECK|CUDA_CHECK|CUDA_SAFE_CALL|"
    r"check[A-Z]?[a-z]*Cuda|cudaCheck|gpuErrchk|gpuAssert|checkCudaErrors|CHECK_CUDA|CHECK_LAST|"
    r"cudaGetErrorString|cudaGetErrorName|(=|return|\(|!=|==)\s*cuda(Device|Stream)Synchronize"
)


@dataclass(slots=True)
class RawFunction:
    name: str
    qualifiers: list[str]  # __global__, __device__, __host__, __forceinline__, ...
    params: list[str]
    signature: str
    span: Span
    name_span: Span
    body_span: Span
    extern_c: bool
    template: bool
    shared_memory: list[str] = field(default_factory=list)
    syncthreads: int = 0
    library_calls: list[str] = field(default_factory=list)
    launches: list[int] = field(default_factory=list)  # indexes into CudaFacts.launches
    use: KernelUse | None = None  # kernels: what the body does with its pointers
    host: HostFacts | None = None  # host functions: what the wrapper/launcher does

    @property
    def kind(self) -> str:
        if "__global__" in self.qualifiers:
            return "kernel"
        if "__device__" in self.qualifiers:
            return "device_function"
        return "function"


@dataclass(slots=True)
class RawLaunch:
    kernel: str
    config: list[str]
    args: list[str]
    span: Span
    name_span: Span
    block_threads: int | None  # threads per block when it is a compile-time literal
    block_span: Span | None
    error_checked: bool
    arg_roots: list[str | None] = field(default_factory=list)  # the variable of each argument


@dataclass(slots=True)
class CudaFacts:
    functions: list[RawFunction] = field(default_factory=list)
    launches: list[RawLaunch] = field(default_factory=list)
    stream_creations: list[Span] = field(default_factory=list)
    library_calls: list[tuple[str, Span]] = field(default_factory=list)
    referenced: set[str] = field(default_factory=set)  # identifiers used as values
    parse_error: Span | None = None
    branches: list[Branch] = field(default_factory=list)  # conditional code (#if, if (0))
    defines: set[str] = field(default_factory=set)  # macros the source #defines
    aten: list[tuple[int, int, str, str]] = field(default_factory=list)  # ATen compute calls
    tf32: list[tuple[Span, str]] = field(default_factory=list)  # TF32 / reduced-precision math
    half_conversions: list[Span] = field(default_factory=list)  # __float2half(...) and kin
    globals: list[tuple[str, str, Span]] = field(default_factory=list)  # file-scope variables
    # Python objects changed from C++ (pybind11 `.attr("x") = ...`, PyObject_SetAttr) on a
    # module the code imports: (span, the attribute's name or "").
    py_patches: list[tuple[Span, str]] = field(default_factory=list)
    # CUDA/library API names made with `##`: (span of the macro's use, macro, the name).
    pasted: list[tuple[Span, str, str]] = field(default_factory=list)
    # Fake joins: a stream waits on an event recorded before the work (or never): (span, why).
    event_joins: list[tuple[Span, str]] = field(default_factory=list)

    @property
    def kernels(self) -> list[RawFunction]:
        return [f for f in self.functions if f.kind != "function"]

    def dead(self, span: Span, flags: set[str] | None = None) -> str | None:
        """Why code at `span` never runs (`#if 0`, `#ifdef` of a macro nothing defines, `if
        (0)`), or None. `flags` are the build's -D macros; None when they are not known."""
        defined = self.defines | (flags or set())
        for branch in self.branches:
            a, b = branch.span
            if a <= span[0] and span[1] <= b:
                why = dead_reason(branch, defined, flags is not None)
                if why is not None:
                    return why
        return None

    def launched_names(self, flags: set[str] | None = None) -> set[str]:
        """Kernels launched (or referenced) in code that is compiled and can run."""
        live = {
            launch.kernel
            for launch in self.launches
            if not self.branches or self.dead(launch.span, flags) is None
        }
        return live | self.referenced

    def function(self, name: str) -> RawFunction | None:
        return next((f for f in self.functions if f.name == name), None)


def _span(node: Node) -> Span:
    return node.start_byte, node.end_byte


def _function_name(declarator: Node) -> Node | None:
    """The name node inside a (possibly pointer/reference) function declarator."""
    node: Node | None = declarator
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    if node is None:
        return None
    return node.child_by_field_name("declarator")


def _last_name(node: Node) -> Node:
    """`a::b::k` -> `k`; `k<float>` -> `k`."""
    while node.type in ("qualified_identifier", "template_function"):
        inner = node.child_by_field_name("name")
        if inner is None:
            break
        node = inner
    return node


def _qualifiers(fn: Node) -> list[str]:
    quals: list[str] = []
    for child in fn.children:
        if child.type.startswith("__") and child.type.endswith("__"):
            quals.append(child.type)
        elif child.type == "launch_bounds":
            quals.append("__launch_bounds__")
    return quals


def _params(declarator: Node) -> list[str]:
    node: Node | None = declarator
    while node is not None and node.type != "function_declarator":
        node = node.child_by_field_name("declarator")
    plist = node.child_by_field_name("parameters") if node is not None else None
    if plist is None:
        return []
    return [collapse(text(p)) for p in plist.named_children if p.type != "comment"]


class _IntEval:
    """Evaluates small integer constant expressions: literals, + - * / <<, dim3(...), and names
    bound to constants in the enclosing function or at file scope (`const int T = 256;`,
    `dim3 block(16, 16);`, `#define THREADS 256`)."""

    def __init__(self, root: Node) -> None:
        self.root = root
        self._defines: dict[str, str] | None = None

    def defines(self) -> dict[str, str]:
        if self._defines is None:
            self._defines = {}
            stack = [self.root]
            while stack:
                node = stack.pop()
                if node.type == "preproc_def":
                    name, value = (
                        node.child_by_field_name("name"),
                        node.child_by_field_name("value"),
                    )
                    if name is not None and value is not None:
                        self._defines[text(name)] = text(value).strip()
                elif node.type in ("translation_unit", "preproc_ifdef", "preproc_if"):
                    stack.extend(node.named_children)
        return self._defines

    def value(self, node: Node | None, scope: Node | None, depth: int = 0) -> int | None:
        if node is None or depth > 8:
            return None
        kind = node.type
        if kind == "number_literal":
            return _int_literal(text(node))
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self.value(node.named_children[0], scope, depth + 1)
        if kind == "binary_expression":
            left = self.value(node.child_by_field_name("left"), scope, depth + 1)
            right = self.value(node.child_by_field_name("right"), scope, depth + 1)
            op = node.child_by_field_name("operator")
            if left is None or right is None or op is None:
                return None
            return _apply(op.type, left, right)
        if kind in ("argument_list", "initializer_list"):  # dim3 b(30, 1) / dim3 b{30, 1}
            return self._product(node.named_children, scope, depth)
        if kind == "call_expression":  # dim3(30, 1)
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            if fn is not None and text(fn) == "dim3" and args is not None:
                return self._product(args.named_children, scope, depth)
            return None
        if kind == "identifier":
            return self._lookup(text(node), node, scope, depth)
        return None

    def _product(self, nodes: list[Node], scope: Node | None, depth: int) -> int | None:
        total = 1
        for n in nodes:
            if n.type == "comment":
                continue
            v = self.value(n, scope, depth + 1)
            if v is None:
                return None
            total *= v
        return total

    def _lookup(self, name: str, use: Node, scope: Node | None, depth: int) -> int | None:
        for where in (scope, self.root):
            if where is None:
                continue
            found = _find_declaration(where, name, use.start_byte)
            if found is not None:
                return self.value(found, scope, depth + 1)
        raw = self.defines().get(name)
        if raw is not None:
            return _int_literal(raw.strip("()"))
        return None


def _find_declaration(scope: Node, name: str, before: int) -> Node | None:
    """The value node of the last `name = value` / `name(value)` declared before `before`."""
    result: Node | None = None
    stack = [scope]
    while stack:
        node = stack.pop()
        if node.start_byte >= before:
            continue
        if node.type == "init_declarator":
            decl = node.child_by_field_name("declarator")
            value = node.child_by_field_name("value")
            if (
                decl is not None
                and text(decl) == name
                and value is not None
                and (result is None or node.start_byte > result.start_byte)
            ):
                result = value
            continue
        if node.type in ("function_definition",) and node is not scope:
            continue
        stack.extend(node.named_children)
    return result


def _int_literal(s: str) -> int | None:
    s = s.rstrip("uUlL")
    try:
        return int(s, 0)
    except ValueError:
        return None


def _apply(op: str, a: int, b: int) -> int | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "/":
        return a // b if b else None
    if op == "<<":
        return a << b if 0 <= b < 32 else None
    return None


def _error_checked(launch: Node) -> bool:
    """Whether a statement after the launch (in its block or an enclosing one) checks errors."""
    node = launch
    for parent in ancestors(launch):
        if parent.type == "function_definition":
            break
        sibling = node.next_named_sibling
        while sibling is not None:
            if _ERROR_CHECK.search(text(sibling)):
                return True
            sibling = sibling.next_named_sibling
        node = parent
    return False


_DEFINITION_DEPTH = 6
_CALL_HINTS = (b"__syncthreads", b"__syncwarp", b"cublas", b"cudnn", b"cudaStreamCreate")
# Reduced-precision math that fp32 code should not use: TF32 tensor cores (WMMA, PTX, cuBLAS
# math modes), fp16/bf16 compute types.
_TF32_HINTS = (b"tf32", b"TF32", b"_FAST_16F", b"_FAST_16BF", b"TENSOR_OP_MATH")
_HALF_CONVERSIONS = (b"__float2half", b"__float2bfloat16", b"__floats2half2", b"__float22half2")
_BRANCH_HINTS = (b"#if", b"if (0", b"if(0", b"if (false", b"if(false", b"if (0u", b"if (!1")


_PY_HINTS = (b".attr", b"SetAttr", b"setattr")
_PY_IMPORTS = re.compile(
    rb"\bmodule_?\s*::\s*import\s*\(|\bPyImport_\w+\s*\(|\bPyEval_GetBuiltins\s*\("
    rb"|\bPySys_GetObject\s*\("
)
_PY_SETS = re.compile(
    rb'\.attr\s*\(\s*"(\w+)"\s*\)\s*=(?!=)'
    rb"|\b(?:PyObject_SetAttr(?:String)?|PyObject_GenericSetAttr|(?:py|pybind11)\s*::\s*setattr)"
    rb'\s*\([^;"]*(?:"(\w+)")?'
)


def _py_patches(root: Node, data: bytes) -> list[tuple[Span, str]]:
    """Attribute writes on Python objects from C++, where the code imports a module: an
    extension that replaces `torch.isclose` from its C++ side. (A pybind11 module that sets its
    own `m.attr("__version__")` imports nothing and is left alone.)"""
    if not _PY_IMPORTS.search(data):
        return []
    found: list[tuple[Span, str]] = []
    for m in _PY_SETS.finditer(data):
        if not _code_offsets(root, [m.start()]):
            continue
        end = data.find(b";", m.end())
        name = (m.group(1) or m.group(2) or b"").decode()
        found.append(((m.start(), end if end > 0 else m.end()), name))
    return found


# Names of the CUDA runtime and driver, NVIDIA's libraries and the Python C API.
API_NAME = re.compile(
    r"^(cuda[A-Z]\w*|cu[A-Z]\w*|cublas\w*|cudnn\w*|cufft\w*|curand\w*|cusparse\w*"
    r"|cusolver\w*|nccl[A-Z]\w*|nvrtc\w*|Py[A-Z][a-z]*_\w+)$"
)


def _pasted(root: Node, data: bytes) -> list[tuple[Span, str, str]]:
    """API names that a `##` macro puts together, at each use of the macro in code."""
    text = data.decode("latin-1")  # one character per byte: offsets stay byte offsets
    found: list[tuple[Span, str, str]] = []
    for inv in cuda_macros.invocations(text):
        if not _code_offsets(root, [inv.start]):
            continue
        for name in inv.pasted:
            if API_NAME.match(name):
                found.append(((inv.start, inv.end), inv.macro, name))
    return found


_EVENT_HINTS = (b"WaitEvent", b".block(")
_WAITS = re.compile(rb"\bcudaStreamWaitEvent\s*\(\s*[^,;]+,\s*&?\s*(\w+)|\b(\w+)\s*\.\s*block\s*\(")
_RECORDS = re.compile(
    rb"\b(?:cudaEventRecord(?:WithFlags)?|cuEventRecord\w*)\s*\(\s*&?\s*(\w+)"
    rb"|\b(\w+)\s*\.\s*record\s*\("
)


def _event_joins(facts: CudaFacts, data: bytes) -> list[tuple[Span, str]]:
    """Waits on an event that no code records, or whose last record before the wait comes
    before a launch: the waiting stream does not wait for that work."""
    recorded_anywhere = {(m.group(1) or m.group(2)).decode() for m in _RECORDS.finditer(data)}
    found: list[tuple[Span, str]] = []
    for fn in facts.functions:
        if fn.kind != "function":
            continue
        start, end = fn.body_span
        body = data[start:end]
        launches = [facts.launches[i].span[0] - start for i in fn.launches]
        records = [
            (m.start(), (m.group(1) or m.group(2)).decode()) for m in _RECORDS.finditer(body)
        ]
        for m in _WAITS.finditer(body):
            event = (m.group(1) or m.group(2)).decode()
            close = body.find(b";", m.end())
            span = (start + m.start(), start + (close if close > 0 else m.end()))
            before = [at for at, name in records if name == event and at < m.start()]
            if not before:
                if event not in recorded_anywhere:
                    found.append((span, f"waits on `{event}`, which no code records: the wait "
                                        "returns at once and joins nothing"))  # fmt: skip
                continue
            last = max(before)
            if any(last < at < m.start() for at in launches):
                found.append((span, f"waits on `{event}`, recorded before the launches it "
                                    "should wait for: the join is fake and that work escapes "
                                    "the timer"))  # fmt: skip
    return found


_MASKED_BITS = re.compile(
    rb"__float_as_u?int\s*\([^;]*?&\s*(0[xX][0-9a-fA-F]{1,8})[uU]?"
    rb"|(0[xX][0-9a-fA-F]{1,8})[uU]?\s*&\s*[^;]*?__float_as_u?int\s*\("
)


def _mantissa_masks(data: bytes) -> list[tuple[Span, str]]:
    """`__float_as_uint(v) & 0xffffe000u`: fp32 values rounded to fewer mantissa bits (10 is
    TF32's, 7 bfloat16's) by integer operations, with no TF32 or 16-bit type spelled. A mask
    that clears 8 to 22 low bits and keeps the exponent does that; clearing all 23 extracts the
    exponent, an honest bit trick."""
    found: list[tuple[Span, str]] = []
    for m in _MASKED_BITS.finditer(data):
        value = int(m.group(1) or m.group(2), 16) & 0xFFFFFFFF
        low = (value & -value).bit_length() - 1 if value else 32
        if 8 <= low <= 22 and value & 0x7F800000 == 0x7F800000:
            found.append(((m.start(), m.end()), m.group(0).decode("latin-1")))
    return found


def _code_offsets(root: Node, offsets: list[int]) -> list[int]:
    """The offsets that are in code (or asm strings), not in comments."""
    out = []
    for at in offsets:
        node = root.descendant_for_byte_range(at, at + 1)
        if node is not None and node.type != "comment":
            out.append(at)
    return out


def _enclosing(root: Node, offsets: list[int], kind: str) -> list[Node]:
    """The innermost `kind` node around each offset, without duplicates, in source order."""
    found: dict[int, Node] = {}
    for offset in offsets:
        node: Node | None = root.descendant_for_byte_range(offset, offset + 1)
        while node is not None and node.type != kind:
            node = node.parent
        if node is not None:
            found.setdefault(node.start_byte, node)
    return [found[k] for k in sorted(found)]


_IDENTIFIER = re.compile(rb"[A-Za-z_][A-Za-z0-9_]*")


def _referenced(root: Node, data: bytes, names: set[str]) -> set[str]:
    """Kernel names used as a value somewhere (cudaLaunchKernel(k, ...), &k, a function pointer),
    not counting their own definitions and declarations.

    One scan of the identifiers for all names: a `find` per name over the whole text was
    quadratic (20,000 kernels in one string took 12 s, `k1` also stopping at every `k10...`)."""
    out: set[str] = set()
    if not names:
        return out
    wanted = {name.encode() for name in names}
    for match in _IDENTIFIER.finditer(data):
        raw = match.group()
        if raw not in wanted:
            continue
        at = match.start()
        node = root.descendant_for_byte_range(at, at + len(raw))
        if node is None or node.type != "identifier" or node.start_byte != at:
            continue
        if node.end_byte != at + len(raw):
            continue
        parent = node.parent
        if parent is None or parent.type == "function_declarator":
            continue
        if parent.type == "call_expression" and any(
            c.type == "kernel_call_syntax" for c in parent.children
        ):
            continue  # a launch: counted as a launch already
        out.add(raw.decode())
        wanted.discard(raw)
    return out


class _FunctionMemo:
    """What one function does, keyed by its own text: typing in one kernel of a long CUDA
    string leaves the other functions' facts as they were."""

    def __init__(self, size: int = 2048) -> None:
        self._items: OrderedDict[tuple, Any] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def get(self, key: tuple) -> Any:
        with self._lock:
            found = self._items.get(key)
            if found is not None:
                self._items.move_to_end(key)
            return found

    def put(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._items[key] = value
            while len(self._items) > self._size:
                self._items.popitem(last=False)


_FUNCTIONS = _FunctionMemo()


def _kernel_use_cached(
    definition: Node, declarator: Node, body: Node, data: bytes, dead: list[Span]
) -> KernelUse:
    start, end = definition.start_byte, definition.end_byte
    inside = tuple((a - start, b - start) for a, b in dead if start <= a and b <= end)
    key = ("kernel", data[start:end], inside)
    found = _FUNCTIONS.get(key)
    if found is None:
        found = kernel_use(definition, declarator, body, data, dead)
        _FUNCTIONS.put(key, found)
    return found


def _host_facts_cached(definition: Node, declarator: Node, body: Node, data: bytes) -> HostFacts:
    start, end = definition.start_byte, definition.end_byte
    key = ("host", data[start:end])
    found = _FUNCTIONS.get(key)
    if found is None:
        found = host_facts(definition, declarator, body).shifted(-start)
        _FUNCTIONS.put(key, found)
    return found.shifted(start)


def _function_definitions(root: Node) -> list[tuple[RawFunction, Node, Node, Node]]:
    """Each function definition with its (definition, declarator, body) nodes, in order.

    Definitions sit near the top of the tree (namespaces, extern "C", templates, struct
    members); not descending into function bodies keeps the query cheap."""
    out: list[tuple[RawFunction, Node, Node, Node]] = []
    for _, cap in grammars.matches("cuda", "functions", root, max_start_depth=_DEFINITION_DEPTH):
        definition, declarator, body = cap["function"][0], cap["declarator"][0], cap["body"][0]
        name_node = _function_name(declarator)
        if name_node is None:
            continue
        parent = definition.parent
        templated = parent is not None and parent.type == "template_declaration"
        raw = RawFunction(
            name=text(_last_name(name_node)),
            qualifiers=_qualifiers(definition),
            params=_params(declarator),
            signature=collapse(text(definition)[: body.start_byte - definition.start_byte]),
            span=_span(parent if templated and parent is not None else definition),
            name_span=_span(name_node),
            body_span=_span(body),
            extern_c=any(a.type == "linkage_specification" for a in ancestors(definition)),
            template=templated,
        )
        out.append((raw, definition, declarator, body))
    out.sort(key=lambda item: item[0].span[0])
    return out


def _launches(root: Node, data: bytes, evaluator: _IntEval) -> list[RawLaunch]:
    """Launches are found from a byte search, then confirmed by the query on the few nodes
    found: a full-tree query costs milliseconds on a large source."""
    out: list[RawLaunch] = []
    launch_calls = _enclosing(root, grammars.find_all(data, (b"<<<",)), "call_expression")
    matched = [m for call in launch_calls for m in grammars.matches("cuda", "launches", call, 0)]
    for _, cap in matched:
        launch = cap["launch"][0]
        kernel = _last_name(cap["kernel"][0])
        config = [c for c in cap["config"][0].named_children if c.type != "comment"]
        args = [a for a in cap["args"][0].named_children if a.type != "comment"]
        scope = next((a for a in ancestors(launch) if a.type == "function_definition"), None)
        block = config[1] if len(config) > 1 else None
        out.append(
            RawLaunch(
                kernel=text(kernel),
                config=[collapse(text(c)) for c in config],
                args=[collapse(text(a)) for a in args],
                span=_span(launch),
                name_span=_span(kernel),
                block_threads=evaluator.value(block, scope) if block is not None else None,
                block_span=_span(block) if block is not None else None,
                error_checked=_error_checked(launch),
                arg_roots=[root_name(a) for a in args],
            )
        )
    out.sort(key=lambda raw: raw.span[0])
    return out


def extract(root: Node, data: bytes) -> CudaFacts:
    """All facts of one parsed CUDA/C++ translation unit."""
    facts = CudaFacts()
    err = first_error(root)
    if err is not None:
        facts.parse_error = _span(err)
    evaluator = _IntEval(root)
    definitions = _function_definitions(root)
    facts.functions = [raw for raw, _, _, _ in definitions]

    # Conditional code first: kernel bodies and launches are read with it in mind.
    if b"#" in data:
        for m in re.finditer(rb"^[ \t]*#[ \t]*define[ \t]+(\w+)", data, re.MULTILINE):
            facts.defines.add(m.group(1).decode())
    branch_hits = grammars.find_all(data, _BRANCH_HINTS)
    if branch_hits:
        facts.branches = branches(root, data, sorted(branch_hits))
    always_dead = [
        b.span for b in facts.branches if dead_reason(b, facts.defines, False) is not None
    ]
    for raw, definition, declarator, body in definitions:
        if raw.kind == "kernel":
            raw.use = _kernel_use_cached(definition, declarator, body, data, always_dead)
        elif raw.kind == "function":
            raw.host = _host_facts_cached(definition, declarator, body, data)
    facts.launches = _launches(root, data, evaluator)

    shared_decls = _enclosing(root, grammars.find_all(data, (b"__shared__",)), "declaration")
    fact_calls = _enclosing(root, grammars.find_all(data, _CALL_HINTS), "call_expression")
    found = grammars.captures_in("cuda", "facts", shared_decls + fact_calls, max_start_depth=0)
    facts.referenced = _referenced(
        root, data, {f.name for f in facts.functions if f.kind == "kernel"}
    )

    by_body = [(f.body_span, f) for f in facts.functions]

    def owner(span: Span) -> RawFunction | None:
        best: RawFunction | None = None
        for (start, end), raw in by_body:
            if start <= span[0] and span[1] <= end and (best is None or start >= best.body_span[0]):
                best = raw
        return best

    for node in found.get("shared", []):
        holder = owner(_span(node))
        if holder is not None:
            holder.shared_memory.append(collapse(text(node)))
    for call, name_node in zip(found.get("call", []), found.get("call.name", []), strict=False):
        called = text(name_node)
        span = _span(call)
        holder = owner(span)
        if called in ("__syncthreads", "__syncwarp"):
            if holder is not None and called == "__syncthreads":
                holder.syncthreads += 1
        elif called.startswith("cudaStreamCreate"):
            facts.stream_creations.append(span)
        else:
            facts.library_calls.append((called, span))
            if holder is not None and called not in holder.library_calls:
                holder.library_calls.append(called)
    for i, raw_launch in enumerate(facts.launches):
        holder = owner(raw_launch.span)
        if holder is not None:
            holder.launches.append(i)

    if b"##" in data:
        facts.pasted = _pasted(root, data)
        for span, _, name in facts.pasted:
            if facts.branches and facts.dead(span) is not None:
                continue
            if re.match(r"^(cudaStreamCreate|cuStreamCreate)", name):
                facts.stream_creations.append(span)
            elif name.startswith(("cublas", "cudnn")):
                facts.library_calls.append((name, span))
    for at in _code_offsets(root, grammars.find_all(data, (b"getStreamFromPool",))):
        # PyTorch's pool of side streams: as much another stream as one cudaStreamCreate makes.
        end = data.find(b")", at)
        span = (at, end + 1 if end > 0 else at + 17)
        if not (facts.branches and facts.dead(span)):
            facts.stream_creations.append(span)
    if grammars.find_all(data, _EVENT_HINTS):
        facts.event_joins = [
            (span, why)
            for span, why in _event_joins(facts, data)
            if _code_offsets(root, [span[0]]) and not (facts.branches and facts.dead(span))
        ]
    facts.globals = _file_scope_variables(root)
    if grammars.find_all(data, _PY_HINTS):
        facts.py_patches = _py_patches(root, data)
    host_spans = [f.body_span for f in facts.functions if f.kind == "function"]
    if host_spans:
        own = {f.name for f in facts.functions}
        facts.aten = aten_calls(root, data, host_spans, own)
    for at in _code_offsets(root, grammars.find_all(data, _TF32_HINTS)):
        end = at
        while end < len(data) and (data[end : end + 1].isalnum() or data[end : end + 1] in b"_.:"):
            end += 1
        start = at
        while start > 0 and (
            data[start - 1 : start].isalnum() or data[start - 1 : start] in b"_.:"
        ):
            start -= 1
        if facts.branches and facts.dead((start, end)) is not None:
            continue
        facts.tf32.append(((start, end), data[start:end].decode("utf-8", "replace")))
    if b"__float_as_" in data:
        for span, token in _mantissa_masks(data):
            if _code_offsets(root, [span[0]]) and not (facts.branches and facts.dead(span)):
                facts.tf32.append((span, token))
    facts.half_conversions = [
        (at, data.find(b"(", at) if data.find(b"(", at) > 0 else at + 12)
        for at in sorted(_code_offsets(root, grammars.find_all(data, _HALF_CONVERSIONS)))
    ]
    return facts


def _file_scope_variables(root: Node) -> list[tuple[str, str, Span]]:
    """(name, type, span) of variables declared outside functions (also in namespaces and
    `extern "C"` blocks): they keep their values between calls."""
    out: list[tuple[str, str, Span]] = []
    stack = [root]
    while stack:
        node = stack.pop()
        for child in node.named_children:
            if child.type in ("linkage_specification", "namespace_definition", "declaration_list"):
                stack.append(child)
            elif child.type == "declaration":
                type_node = child.child_by_field_name("type")
                for d in child.children_by_field_name("declarator"):
                    pointer = False
                    name = d.child_by_field_name("declarator") if d.type == "init_declarator" else d
                    while name is not None and name.type not in (
                        "identifier",
                        "function_declarator",
                    ):
                        if name.type == "pointer_declarator":
                            pointer = True
                        name = name.child_by_field_name("declarator")
                    if name is not None and name.type == "identifier":
                        shown = text(type_node) + ("*" if pointer else "")
                        out.append((text(name), shown, (child.start_byte, child.end_byte)))
    return out


class _SourceCache:
    """Facts and trees of recently seen CUDA sources (the virtual texts of CUDA strings).

    Keyed by content: editing Python code never re-parses a string. When a string itself is
    edited, the tree of its previous text is edited and re-parsed incrementally."""

    def __init__(self, facts_size: int = 256, trees_size: int = 32) -> None:
        self._facts: OrderedDict[bytes, CudaFacts] = OrderedDict()
        self._trees: OrderedDict[bytes, Tree] = OrderedDict()
        self._sizes = (facts_size, trees_size)
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self._facts.clear()
            self._trees.clear()

    def facts(self, data: bytes, previous: bytes | None = None) -> CudaFacts:
        with self._lock:
            found = self._facts.get(data)
            if found is not None:
                self._facts.move_to_end(data)
                return found
            old = self._trees.get(previous) if previous is not None else None
        tree = _parse(data, previous, old)
        facts = extract(tree.root_node, data)
        with self._lock:
            self._facts[data] = facts
            self._trees[data] = tree
            while len(self._facts) > self._sizes[0]:
                self._facts.popitem(last=False)
            while len(self._trees) > self._sizes[1]:
                self._trees.popitem(last=False)
        return facts


def _common_prefix(a: bytes, b: bytes) -> int:
    ma, mb = memoryview(a), memoryview(b)
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ma[:mid] == mb[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _parse(data: bytes, previous: bytes | None, old: Tree | None) -> Tree:
    parser = grammars.parser("cuda")
    parser.deadline = time.monotonic() + grammars.PARSE_BUDGET_S
    if previous is None or old is None:
        return parser.parse(data)
    start = _common_prefix(previous, data)
    limit = min(len(previous), len(data)) - start
    suffix = _common_prefix(previous[::-1], data[::-1])
    suffix = min(suffix, limit)
    old_end, new_end = len(previous) - suffix, len(data) - suffix
    old_index, new_index = LineIndex(previous), LineIndex(data)
    edited = old.copy()  # the cached tree stays valid for its own text
    edited.edit(
        start_byte=start,
        old_end_byte=old_end,
        new_end_byte=new_end,
        start_point=old_index.byte_to_point(start),
        old_end_point=old_index.byte_to_point(old_end),
        new_end_point=new_index.byte_to_point(new_end),
    )
    return parser.parse(data, edited)


SOURCES = _SourceCache()


def facts_of_source(data: bytes, previous: bytes | None = None) -> CudaFacts:
    """Facts of a CUDA source given as bytes, cached by content. `previous` is the text this
    one was edited from, if known: its tree is then reused."""
    return SOURCES.facts(data, previous)
