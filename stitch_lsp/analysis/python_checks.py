"""Anti-cheating checks on a candidate solution (a file defining ModelNew, or one whose header
names its reference).

They look for the exploits KernelBench and StitchCUDA list: PyTorch doing the work, fallbacks,
calls back into the reference, no-op or constant outputs, caches keyed on input identity,
timer patching, side streams and threads, and fp32 work cast down. A false positive on an
honest solution is a bug: honest solutions often keep a GEMM or convolution on PyTorch's vendor
libraries and fuse the tail in CUDA, and pass `x.data_ptr()` to a launcher.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from tree_sitter import Node

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.analysis.python_facts import PyClass, PyFacts, param_names
from stitch_lsp.analysis.syntax import text
from stitch_lsp.analysis.torch_ops import classify_call, is_handle_use
from stitch_lsp.models.findings import Severity

_ALLOC = re.compile(
    r"^(torch\.)?(zeros|ones|full|empty|zeros_like|ones_like|full_like|empty_like|rand|randn"
    r"|rand_like|randn_like|tensor|as_tensor|empty_strided)$"
)
_DOWNCAST = re.compile(r"float16|\bhalf\b|bfloat16|HalfTensor|BFloat16Tensor|\bfp16\b")
_REFERENCE_LOW_PRECISION = re.compile(r"float16|\.half\(\)|bfloat16|\bhalf\b")
_EXTENSION_CTORS = re.compile(
    r"(^|\.)(load_inline|load|load_cuda|RawKernel|RawModule|ElementwiseKernel|ReductionKernel"
    r"|CDLL|cdll\.LoadLibrary|compile_cuda|jit)$"
)
_CACHE_METHODS = frozenset({"get", "setdefault", "pop", "__contains__", "__getitem__", "add"})
_TIMER_ATTRS = frozenset(
    {"record", "elapsed_time", "synchronize", "perf_counter", "perf_counter_ns"}
)
_TIMER_NAMES = re.compile(
    r"record|elapsed_time|synchronize|perf_counter|monotonic|\btime\b|\btime_ns\b|Event"
)
_NAME = re.compile(r"[A-Za-z_][\w.]*(?:\(\))?[\w.]*")
_THREAD_MODULES = re.compile(r"\b(threading|_thread|concurrent\.futures|multiprocessing)\b")


@dataclass(slots=True)
class Call:
    node: Node
    callee: str
    args: Node


@dataclass
class CandidateContext:
    """What the checks share about one candidate file."""

    facts: PyFacts
    to_range: Callable[[Node], Range]
    candidates: list[PyClass]
    reference_names: set[str]
    reference_fp32: bool
    extension_handles: set[str]  # names/attributes bound to compiled CUDA (ext, self.ext)
    extension_kernels: bool  # the CUDA those handles build defines real kernels (or is unknown)
    diags: list[Diag] = field(default_factory=list)

    def add(self, node: Node, severity: Severity, rule_id: str, message: str) -> None:
        self.diags.append(Diag(self.to_range(node), severity, rule_id, message))


def _body_facts(fn: Node) -> dict[str, list[Node]]:
    return grammars.captures("python", "function_body", fn)


def _calls(found: dict[str, list[Node]]) -> list[Call]:
    calls = found.get("call", [])
    out = []
    for call in calls:
        fn = call.child_by_field_name("function")
        args = call.child_by_field_name("arguments")
        if fn is not None and args is not None:
            out.append(Call(call, text(fn), args))
    return out


def _layer_attrs(cls: PyClass) -> dict[str, str]:
    """`self.x = nn.Conv2d(...)` in __init__ -> {"self.x": "nn.Conv2d"}: what each attribute
    was built with."""
    init = cls.methods.get("__init__")
    out: dict[str, str] = {}
    if init is None:
        return out
    stack = [init]
    while stack:
        node = stack.pop()
        if node.type == "assignment":
            left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
            if left is not None and right is not None and right.type == "call":
                out[text(left)] = text(right.child_by_field_name("function"))
        stack.extend(node.named_children)
    return out


def _code_set(ctx: CandidateContext) -> list[tuple[PyClass | None, Node]]:
    """Methods of the candidate classes (not __init__) and the module functions they call."""
    out: list[tuple[PyClass | None, Node]] = []
    seen: set[int] = set()
    queue: list[tuple[PyClass | None, Node]] = []
    for cls in ctx.candidates:
        for name, fn in cls.methods.items():
            if name != "__init__":
                queue.append((cls, fn))
    while queue:
        owner, fn = queue.pop(0)
        if fn.id in seen:
            continue
        seen.add(fn.id)
        out.append((owner, fn))
        for call in _calls(_body_facts(fn)):
            target = ctx.facts.functions.get(call.callee)
            if target is not None and target.id not in seen:
                queue.append((None, target))
    return out


def _uses_extension(ctx: CandidateContext, code: list[tuple[PyClass | None, Node]]) -> bool:
    if not ctx.extension_kernels:
        return False
    for _, fn in code:
        for call in _calls(_body_facts(fn)):
            if is_handle_use(call.callee, ctx.extension_handles):
                return True
            if call.callee.startswith("torch.ops.") and not call.callee.startswith(
                "torch.ops.aten"
            ):
                return True
            # A kernel object handed to a launcher (cupy kernels, triton's kernel[grid](...)).
            fn_node = call.node.child_by_field_name("function")
            if fn_node is not None and fn_node.type == "subscript":
                return True
    return False


def check_candidate(ctx: CandidateContext) -> list[Diag]:
    code = _code_set(ctx)
    layers: dict[str, str] = {}
    for cls in ctx.candidates:
        layers.update(_layer_attrs(cls))
    reference_attrs = {attr for attr, ctor in layers.items() if ctor in ctx.reference_names}
    uses_cuda = _uses_extension(ctx, code)

    _check_inheritance(ctx)
    for cls in ctx.candidates:
        fwd = cls.methods.get("forward")
        if fwd is not None:
            _check_noop(ctx, fwd)
            _check_constant_output(ctx, fwd)
            _check_input_mutation(ctx, fwd)
    for _, fn in code:
        found = _body_facts(fn)
        calls = _calls(found)
        _check_torch_ops(ctx, fn, calls, found, layers, uses_cuda)
        _check_reference_calls(ctx, calls, reference_attrs)
        _check_fallbacks(ctx, found, layers, reference_attrs)
        _check_input_cache(ctx, fn, calls)
    for cls in ctx.candidates:
        for fn in cls.methods.values():
            _check_downcast(ctx, _calls(_body_facts(fn)))
    for _, fn in code:
        if not any(fn is m for c in ctx.candidates for m in c.methods.values()):
            _check_downcast(ctx, _calls(_body_facts(fn)))
    return ctx.diags


# Where the `candidate` query can match (a superset); the query confirms each hit.
_FILE_WIDE_HINT = re.compile(
    rb"\.(?:record|elapsed_time|synchronize|perf_counter|time|monotonic|Event|Stream|stream"
    rb"|ExternalStream|current_stream)\b"
)
_THREAD_HINTS = (b"Thread", b"Process", b"Pool", b"start_new_thread", b"Timer")


def check_file_wide(ctx: CandidateContext, roots: list[Node], data: bytes) -> list[Diag]:
    """Timer patching, side streams and threads, anywhere in a candidate file."""
    hits = [m.start() for m in _FILE_WIDE_HINT.finditer(data)]
    hits += grammars.find_all(data, (b"setattr", b"patch", b"allow_tf32", b"_matmul_precision"))
    threads_imported = any(_THREAD_MODULES.search(text(i)) for i in ctx.facts.imports)
    if threads_imported:
        hits += grammars.find_all(data, _THREAD_HINTS)
    found = grammars.captures_in("python", "candidate", grammars.statements_at(roots, hits))
    for target, attr in zip(
        found.get("patch.target", []), found.get("patch.attr", []), strict=False
    ):
        t = text(target)
        if t.startswith(("torch.", "time.", "cuda.")) or text(attr) in _TIMER_ATTRS:
            ctx.add(
                target,
                Severity.error,
                "timer-patch",
                f"assigns over `{t}`: replacing timing or synchronisation fakes the measurement",
            )
    for call, args in zip(found.get("setattr", []), found.get("setattr.args", []), strict=False):
        names = " ".join(text(a) for a in args.named_children[:2])
        if _TIMER_NAMES.search(names) and re.search(r"torch|time|cuda|Event", names):
            ctx.add(
                call,
                Severity.error,
                "timer-patch",
                "patches a timer or synchronisation function: the measurement would be fake",
            )
    for call in found.get("stream", []):
        ctx.add(
            call,
            Severity.warning,
            "side-stream",
            "uses a CUDA stream other than the current one: work there is invisible to the "
            "benchmark's events; launch on torch.cuda.current_stream()",
        )
    if ctx.reference_fp32:
        tf32 = found.get("tf32", []) + [
            call
            for call, args in zip(
                found.get("precision", []), found.get("precision.args", []), strict=False
            )
            if "highest" not in text(args)
        ]
        for node in tf32:
            ctx.add(
                node,
                Severity.warning,
                "downcast",
                "lets fp32 matmuls run in TF32 (10-bit mantissa): the reference is full fp32, "
                "and TF32 only passes because the tolerance is loose",
            )
    if threads_imported:
        for call in found.get("thread", []):
            ctx.add(
                call,
                Severity.error,
                "threads",
                "starts a thread or process: work outside the timed call does not count",
            )
    return ctx.diags


# -- individual checks ------------------------------------------------------------------------


def _check_inheritance(ctx: CandidateContext) -> None:
    for cls in ctx.candidates:
        sup = cls.node.child_by_field_name("superclasses")
        if sup is None:
            continue
        for base in sup.named_children:
            if text(base) in ctx.reference_names:
                ctx.add(
                    base,
                    Severity.error,
                    "reference-call",
                    f"`{cls.name}` inherits from the reference `{text(base)}`: "
                    "it can run the reference's forward instead of its own kernels",
                )


def _check_reference_calls(ctx: CandidateContext, calls: list[Call], ref_attrs: set[str]) -> None:
    for call in calls:
        c = call.callee
        hit = None
        if re.match(r"^super\(.*\)\.forward$", c):
            hit = "calls the parent class's forward"
        elif any(c in (r, f"{r}.forward", f"{r}.__call__") for r in ctx.reference_names):
            hit = f"calls the reference `{c}`"
        elif c in ref_attrs or any(c == f"{a}.forward" for a in ref_attrs):
            hit = f"runs the reference model held in `{c}`"
        if hit:
            ctx.add(
                call.node,
                Severity.error,
                "reference-call",
                f"{hit}: that is the reference's computation, not a CUDA implementation",
            )


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


def _check_noop(ctx: CandidateContext, fwd: Node) -> None:
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


def _check_constant_output(ctx: CandidateContext, fwd: Node) -> None:
    found = _body_facts(fwd)
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
        if fn is not None and _ALLOC.match(text(fn)):
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
        if fn is None or not _ALLOC.match(text(fn)):
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


# Names an expression may use and still be computed from the module's parameters alone.
_STATIC_NAMES = frozenset({"self", "torch", "F", "nn", "math", "np", "numpy"})


def _names_used(node: Node) -> list[str]:
    """Variable names read by an expression (not attribute names, not keyword names)."""
    out: list[str] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            out.append(text(n))
        elif n.type == "attribute":
            obj = n.child_by_field_name("object")
            if obj is not None:
                stack.append(obj)
        elif n.type == "keyword_argument":
            value = n.child_by_field_name("value")
            if value is not None:
                stack.append(value)
        else:
            stack.extend(n.named_children)
    return out


def _parameter_only_locals(fn: Node) -> set[str]:
    """Locals computed from `self` (parameters, buffers) and constants only, in source order:
    `scale = self.bn.weight / torch.sqrt(self.bn.running_var + eps)` is weight preparation."""
    known: set[str] = set()
    assignments = []
    stack = [fn.child_by_field_name("body")]
    while stack:
        n = stack.pop()
        if n is None or n.type in ("function_definition", "lambda", "class_definition"):
            continue
        if n.type == "assignment":
            assignments.append(n)
        stack.extend(n.named_children)
    for node in sorted(assignments, key=lambda n: n.start_byte):
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if left is None or right is None:
            continue
        targets = [t for t in _names_used(left) if t != "self"]
        if all(name in _STATIC_NAMES or name in known for name in _names_used(right)):
            known.update(targets)
        else:
            known.difference_update(targets)
    return known


def _check_torch_ops(
    ctx: CandidateContext,
    fn: Node,
    calls: list[Call],
    found: dict[str, list[Node]],
    layers: dict[str, str],
    uses_cuda: bool,
) -> None:
    hits: list[tuple[Node, str, str]] = []
    static = None
    for call in calls:
        cls = classify_call(call.callee, layers, ctx.extension_handles)
        if cls is None:
            continue
        if static is None:
            static = _parameter_only_locals(fn) | _STATIC_NAMES
        if all(name in static for name in _names_used(call.node)):
            continue  # weight preparation: it does not touch the inputs
        hits.append((call.node, cls[0], cls[1]))
    for node in found.get("matmul", []):
        hits.append((node, "heavy", "@ (matmul)"))
    for node, weight, op in hits:
        if not uses_cuda:
            why = (
                "the CUDA extension is built but forward never calls it"
                if ctx.extension_handles
                else "no custom CUDA kernel runs in forward"
            )
            ctx.add(node, Severity.error, "torch-op", f"`{op}` runs in PyTorch and {why}")
        elif weight == "light":
            ctx.add(
                node,
                Severity.warning,
                "torch-op",
                f"`{op}` is left in PyTorch: fuse it into the CUDA kernel",
            )
        else:
            ctx.add(
                node,
                Severity.information,
                "torch-op",
                f"`{op}` stays on PyTorch's vendor library (cuBLAS/cuDNN); the custom CUDA "
                "covers the rest",
            )


def _fallback_call(
    ctx: CandidateContext, node: Node, layers: dict[str, str], ref_attrs: set[str]
) -> Call | None:
    """The first call under `node` that is PyTorch compute or the reference."""
    for call in _calls(grammars.captures("python", "function_body", node)):
        is_ref = (
            call.callee in ctx.reference_names
            or call.callee in ref_attrs
            or re.match(r"^super\(.*\)\.forward$", call.callee)
        )
        if is_ref or classify_call(call.callee, layers, ctx.extension_handles) is not None:
            return call
    return None


def _mentions_handle(ctx: CandidateContext, node: Node) -> bool:
    names = {re.sub(r"\(.*?\)", "", t) for t in _NAME.findall(text(node))}
    return any(is_handle_use(n, ctx.extension_handles) for n in names)


def _check_fallbacks(
    ctx: CandidateContext, found: dict[str, list[Node]], layers: dict[str, str], ref_attrs: set[str]
) -> None:
    for clause in found.get("except", []):
        call = _fallback_call(ctx, clause, layers, ref_attrs)
        if call is not None:
            ctx.add(
                clause.child(0) or clause,
                Severity.error,
                "torch-fallback",
                f"except falls back to PyTorch (`{call.callee}`): a failing kernel would "
                "still produce the right answer",
            )
    # `if ext is None: return torch...` / `if HAVE_EXT: ... else: F.gelu(x)`
    for stmt, cond in zip(found.get("if", []), found.get("if.cond", []), strict=False):
        if not _mentions_handle(ctx, cond):
            continue
        branches = [stmt.child_by_field_name("consequence")]
        branches += [c for c in stmt.named_children if c.type in ("elif_clause", "else_clause")]
        for branch in branches:
            if branch is None or _mentions_handle(ctx, branch):
                continue
            call = _fallback_call(ctx, branch, layers, ref_attrs)
            if call is not None:
                ctx.add(
                    stmt.child(0) or stmt,
                    Severity.error,
                    "torch-fallback",
                    f"when the CUDA extension is unavailable this falls back to PyTorch "
                    f"(`{call.callee}`): the result would not come from the kernel",
                )
                break


def _key_use(node: Node) -> str | None:
    """How an identity/pointer value is used, when that use is a cache key or comparison."""
    child, parent = node, node.parent
    while parent is not None and parent.type in ("tuple", "parenthesized_expression", "list"):
        child, parent = parent, parent.parent
    if parent is None:
        return None
    if parent.type == "subscript" and parent.child_by_field_name("value") != child:
        return "as a dictionary key"
    if parent.type == "comparison_operator":
        return "in a comparison"
    if parent.type == "pair" and parent.child_by_field_name("key") == child:
        return "as a dictionary key"
    if parent.type == "assignment" and parent.child_by_field_name("right") == child:
        left = parent.child_by_field_name("left")
        if left is not None and left.type in ("attribute", "subscript"):
            return "stored on the module"
        return None
    if parent.type == "argument_list":
        call = parent.parent
        fn = call.child_by_field_name("function") if call is not None else None
        if fn is not None and fn.type == "attribute":
            method = text(fn.child_by_field_name("attribute"))
            if method in _CACHE_METHODS:
                return "as a cache key"
    return None


def _check_input_cache(ctx: CandidateContext, fn: Node, calls: list[Call]) -> None:
    for call in calls:
        c = call.callee
        if not (c.endswith(".data_ptr") or c in ("id", "hash")):
            continue
        if c in ("id", "hash") and not call.args.named_children:
            continue
        use = _key_use(call.node)
        if use is None:
            # key = x.data_ptr()  /  key = (x.data_ptr(), x.shape); ... cache[key]
            parent = call.node.parent
            while parent is not None and parent.type in (
                "tuple",
                "parenthesized_expression",
                "list",
            ):
                parent = parent.parent
            if parent is not None and parent.type == "assignment":
                left = parent.child_by_field_name("left")
                if left is not None and left.type == "identifier":
                    for n in _identifiers(fn, text(left)):
                        if n.start_byte > parent.end_byte:
                            use = _key_use(n)
                            if use:
                                break
        if use:
            ctx.add(
                call.node,
                Severity.error,
                "input-cache",
                f"`{text(call.node)}` is used {use}: results keyed on which tensor came in, not "
                "on its values, skip the work on repeated inputs",
            )


def _check_downcast(ctx: CandidateContext, calls: list[Call]) -> None:
    if not ctx.reference_fp32:
        return
    for call in calls:
        c = call.callee
        args = text(call.args)
        hit = (
            c.endswith((".half", ".bfloat16"))
            or (c.endswith((".to", ".type")) and _DOWNCAST.search(args))
            or re.search(r"(^|\.)autocast$", c)
        )
        if hit:
            ctx.add(
                call.node,
                Severity.warning,
                "downcast",
                f"`{text(call.node)[:60]}` lowers fp32 work to 16-bit: the reference is fp32, "
                "so this is a different (less precise) computation",
            )


_NOT_MUTATIONS = frozenset({"requires_grad_", "share_memory_", "retain_grad"})
# Methods that return the same storage: the result still is the input.
_ALIAS_METHODS = frozenset(
    {"contiguous", "view", "view_as", "reshape", "flatten", "squeeze", "unsqueeze", "detach", "t"}
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


def _check_input_mutation(ctx: CandidateContext, fwd: Node) -> None:
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
            args = node.child_by_field_name("arguments")
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


def reference_is_low_precision(source: str) -> bool:
    return bool(_REFERENCE_LOW_PRECISION.search(source))


def extension_ctor(callee: str) -> bool:
    return bool(_EXTENSION_CTORS.search(callee))
