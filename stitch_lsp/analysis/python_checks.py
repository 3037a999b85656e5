"""Anti-cheating checks on a candidate solution (a file defining ModelNew, or one whose header
names its reference).

They look for the exploits KernelBench and StitchCUDA list: PyTorch doing the work, fallbacks,
calls back into the reference, caches keyed on input identity, and fp32 work cast down. Every
callee is resolved first (`names.Resolver`), so `G.gelu`, `mm = torch.matmul`, `getattr(F,
"relu")`, a lambda or a helper that receives the op count as what they are. A false positive
on an honest solution is a bug: honest solutions often keep a GEMM or convolution on PyTorch's
vendor libraries and fuse the tail in CUDA, and pass `x.data_ptr()` to a launcher.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from tree_sitter import Node

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.analysis.names import Ref, Resolver, class_methods
from stitch_lsp.analysis.python_facts import PyClass, PyFacts
from stitch_lsp.analysis.python_outputs import (
    check_constant_output,
    check_input_mutation,
    check_noop,
)
from stitch_lsp.analysis.reference import ReferenceInfo
from stitch_lsp.analysis.syntax import text
from stitch_lsp.analysis.torch_ops import (
    HEAVY_OPS,
    classify_resolved,
    is_handle_use,
    op_family,
    torch_op,
)
from stitch_lsp.models.findings import Severity

_DOWNCAST = re.compile(r"float16|\bhalf\b|bfloat16|HalfTensor|BFloat16Tensor|\bfp16\b|float8")
_LOW_DTYPE = re.compile(r"^torch\.(float16|half|bfloat16|float8\w*|cuda\.HalfTensor|HalfTensor)$")
_REFERENCE_LOW_PRECISION = re.compile(r"float16|\.half\(\)|bfloat16|\bhalf\b")
_EXTENSION_CTORS = re.compile(
    r"(^|\.)(load_inline|load|load_cuda|RawKernel|RawModule|ElementwiseKernel|ReductionKernel"
    r"|CDLL|cdll\.LoadLibrary|compile_cuda|jit)$"
)
_CACHE_METHODS = frozenset({"get", "setdefault", "pop", "__contains__", "__getitem__", "add"})
_NAME = re.compile(r"[A-Za-z_][\w.]*(?:\(\))?[\w.]*")
# Names an expression may use and still be computed from the module's parameters alone.
_STATIC_NAMES = frozenset({"self", "torch", "F", "nn", "math", "np", "numpy"})


@dataclass(slots=True)
class Call:
    node: Node
    callee: str  # as written
    args: Node
    ref: Ref | None = None  # what the callee resolved to

    @property
    def canonical(self) -> str:
        if self.ref is not None and self.ref.dotted is not None:
            return self.ref.dotted
        if self.ref is not None and self.ref.spelled is not None:
            return self.ref.spelled
        return self.callee


@dataclass(slots=True)
class TorchHit:
    """PyTorch compute found in the candidate, before its severity is decided."""

    range: Range
    weight: str  # heavy | light
    shown: str  # as written
    canonical: str  # what it resolved to
    how: str  # call | value (handed over to be called) | aten (C++ in the extension)


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
    resolver: Resolver
    reference: ReferenceInfo | None = None
    dtype_assumed: bool = False  # nothing said which precision the problem is in
    diags: list[Diag] = field(default_factory=list)
    torch_hits: list[TorchHit] = field(default_factory=list)
    uses_cuda: bool = False
    code: list[tuple[PyClass | None, Node]] = field(default_factory=list)
    _bodies: dict[int, dict[str, list[Node]]] = field(default_factory=dict)
    _calls: dict[int, list[Call]] = field(default_factory=dict)

    def add(self, node: Node, severity: Severity, rule_id: str, message: str) -> None:
        self.diags.append(Diag(self.to_range(node), severity, rule_id, message))

    def body(self, fn: Node) -> dict[str, list[Node]]:
        found = self._bodies.get(fn.id)
        if found is None:
            found = grammars.captures("python", "function_body", fn)
            self._bodies[fn.id] = found
        return found

    def calls(self, fn: Node) -> list[Call]:
        """The calls in a function (nested functions and lambdas included), resolved."""
        found = self._calls.get(fn.id)
        if found is None:
            found = []
            for call in self.body(fn).get("call", []):
                callee = call.child_by_field_name("function")
                args = call.child_by_field_name("arguments")
                if callee is not None and args is not None:
                    found.append(Call(call, text(callee), args, self.resolver.resolve(callee)))
            self._calls[fn.id] = found
        return found

    def forget_calls(self) -> None:
        self._calls.clear()
        self.resolver.forget()


def code_set(ctx: CandidateContext) -> list[tuple[PyClass | None, Node]]:
    """Methods of the candidate classes (not __init__), forward first, and everything they
    reach: module functions, methods of other classes, lambdas, and functions handed over as
    arguments, transitively. Call arguments are noted on the way, so a helper's parameters
    resolve to what its callers pass."""
    out: list[tuple[PyClass | None, Node]] = []
    seen: set[int] = set()
    queue: list[tuple[PyClass | None, Node]] = []
    for cls in ctx.candidates:
        methods = sorted(cls.methods.items(), key=lambda kv: kv[0] != "forward")
        queue.extend((cls, fn) for name, fn in methods if name != "__init__")
    resolver = ctx.resolver
    while queue:
        owner, fn = queue.pop(0)
        if fn.id in seen:
            continue
        seen.add(fn.id)
        out.append((owner, fn))
        for call in ctx.calls(fn):
            reached = []
            if call.ref is not None and call.ref.node is not None:
                target = call.ref.node
                if target.type == "function_definition":
                    resolver.note_call_arguments(target, call.node, fn)
                    reached.append(target)
                elif target.type == "lambda":
                    reached.append(target)
                elif target.type == "class_definition" and call.ref.instance:
                    reached += [
                        m for n, m in class_methods(target).items() if n in ("forward", "__call__")
                    ]
            for arg in call.args.named_children:
                if arg.type in ("identifier", "attribute", "lambda"):
                    r = resolver.resolve(arg)
                    if (
                        r is not None
                        and r.node is not None
                        and r.node.type
                        in (
                            "function_definition",
                            "lambda",
                        )
                    ):
                        reached.append(r.node)
            queue.extend(
                (None, t) for t in reached if t.id not in seen and not _in_reference(ctx, t)
            )
    ctx.forget_calls()  # resolve again now that every call's arguments are known
    return out


def _in_reference(ctx: CandidateContext, node: Node) -> bool:
    for name in ctx.reference_names:
        cls = ctx.facts.cls(name)
        if cls is not None and cls.node.start_byte <= node.start_byte < cls.node.end_byte:
            return True
    return False


def _uses_extension(ctx: CandidateContext, code: list[tuple[PyClass | None, Node]]) -> bool:
    if not ctx.extension_kernels:
        return False
    for _, fn in code:
        for call in ctx.calls(fn):
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
    code = code_set(ctx)
    ctx.code = code
    reference_attrs = _reference_attributes(ctx)
    ctx.uses_cuda = _uses_extension(ctx, code)

    _check_inheritance(ctx)
    for cls in ctx.candidates:
        fwd = cls.methods.get("forward")
        if fwd is not None:
            check_noop(ctx, fwd)
            check_constant_output(ctx, fwd)
            check_input_mutation(ctx, fwd)
    static_names = _STATIC_NAMES | set(ctx.resolver.module_aliases())
    for _, fn in code:
        calls = ctx.calls(fn)
        _collect_torch_ops(ctx, fn, calls, static_names)
        _check_reference_calls(ctx, calls, reference_attrs)
        _check_fallbacks(ctx, fn, reference_attrs)
        _check_input_cache(ctx, fn, calls)
    methods = {m.id for c in ctx.candidates for m in c.methods.values()}
    for cls in ctx.candidates:
        for fn in cls.methods.values():
            _check_downcast(ctx, ctx.calls(fn))
    for _, fn in code:
        if fn.id not in methods:
            _check_downcast(ctx, ctx.calls(fn))
    return ctx.diags


def _reference_attributes(ctx: CandidateContext) -> set[str]:
    """`self.ref` attributes of the candidate classes that hold the reference model."""
    out: set[str] = set()
    for cls in ctx.candidates:
        for attr, values in ctx.resolver.self_attribute_values(cls.node).items():
            for value, _ in values:
                ref = ctx.resolver.resolve(value)
                if _is_reference(ctx, ref):
                    out.add(f"self.{attr}")
    return out


def _is_reference(ctx: CandidateContext, ref: Ref | None) -> bool:
    if ref is None:
        return False
    if ref.node is not None:
        node = ref.node
        if node.type == "function_definition":
            cls = Resolver.class_of(node)
            return cls is not None and text(cls.child_by_field_name("name")) in ctx.reference_names
        return (
            node.type == "class_definition"
            and text(node.child_by_field_name("name")) in ctx.reference_names
        )
    if ref.dotted is not None and not ref.dotted.startswith("torch."):
        parts = ref.dotted.split(".")
        tail = parts[-2] if parts[-1] in ("forward", "__call__") and len(parts) > 1 else parts[-1]
        return len(parts) > 1 and tail in ctx.reference_names
    return False


# -- PyTorch compute -------------------------------------------------------------------------


def names_read(node: Node) -> list[str]:
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


def parameter_only_locals(fn: Node) -> set[str]:
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
        targets = [t for t in names_read(left) if t != "self"]
        if all(name in _STATIC_NAMES or name in known for name in names_read(right)):
            known.update(targets)
        else:
            known.difference_update(targets)
    return known


def _collect_torch_ops(
    ctx: CandidateContext, fn: Node, calls: list[Call], static_names: set[str] | frozenset[str]
) -> None:
    static: set[str] | None = None
    for call in calls:
        hit = classify_resolved(call.callee, call.ref, ctx.extension_handles)
        if hit is None:
            continue
        if static is None:
            static = parameter_only_locals(fn) | static_names
        if all(name in static for name in names_read(call.args)) and _static_receiver(call, static):
            continue  # weight preparation: it does not touch the inputs
        ctx.torch_hits.append(TorchHit(ctx.to_range(call.node), hit[0], hit[1], hit[2], "call"))
    for node in ctx.body(fn).get("matmul", []):
        ctx.torch_hits.append(
            TorchHit(ctx.to_range(node), "heavy", "@ (matmul)", "torch.matmul", "call")
        )
    # An operator handed over to be called elsewhere: `_run(ext.relu, torch.relu, x)`.
    for node in ctx.body(fn).get("value", []):
        if is_handle_use(text(node), ctx.extension_handles):
            continue
        ref = ctx.resolver.resolve(node)
        if ref is None or ref.dotted is None or ref.instance:
            continue
        op = torch_op(ref.dotted)
        if op is not None:
            weight = "heavy" if op in HEAVY_OPS else "light"
            ctx.torch_hits.append(
                TorchHit(ctx.to_range(node), weight, text(node), ref.dotted, "value")
            )


def _static_receiver(call: Call, static: set[str]) -> bool:
    """For a method call `w.t()`, whether `w` itself is static (names in `call.callee`)."""
    fn = call.node.child_by_field_name("function")
    if fn is None or fn.type != "attribute":
        return True
    obj = fn.child_by_field_name("object")
    return obj is None or all(name in static for name in names_read(obj))


def _plain(shown: str, canonical: str) -> bool:
    """Whether a callee is spelled the usual way, so naming what it resolved to adds nothing."""
    op = canonical.rsplit(".", 1)[-1]
    usual = (f"F.{op}", f"nn.functional.{op}", f"torch.{op}", f"torch.nn.functional.{op}")
    return shown == canonical or shown in usual or shown in (f"nn.{op}", f".{op}()")


def _why_no_cuda(ctx: CandidateContext) -> str:
    if ctx.extension_handles:
        return "the CUDA extension is built but forward never calls it"
    return "no custom CUDA kernel runs in forward"


def whole_problem(ctx: CandidateContext) -> set[str]:
    """The reference's operator families when PyTorch in ModelNew covers all of them: the
    reference is that op alone (no elementwise arithmetic besides), so the custom CUDA can only
    copy or scale what PyTorch computed. Empty otherwise."""
    ref = ctx.reference
    if ref is None or not ref.ops or ref.arithmetic:
        return set()
    families = {f for h in ctx.torch_hits for f in hit_families(h)}
    return set(ref.ops) if ref.ops <= families else set()


def hit_families(hit: TorchHit) -> set[str]:
    """The operator families a hit computes: one for a PyTorch call, the list a vendor call
    carries (`cudnnConvolutionForward` is a convolution of any dimension)."""
    if hit.how == "vendor":
        return set(hit.canonical.split("|"))
    return {op_family(hit.canonical)}


def emit_torch_hits(ctx: CandidateContext) -> None:
    """Turn the PyTorch compute found in Python and in the extension's C++ into diagnostics."""
    whole = whole_problem(ctx)
    noted: set[str] = set()
    for hit in ctx.torch_hits:
        if hit.how == "vendor":
            # A cuBLAS/cuDNN call is a legitimate library call unless it is the whole problem;
            # beside other work of the reference it is noted once per family (the Verifier's
            # attribution measures how much of the time it takes).
            if hit_families(hit) & whole:
                ctx.diags.append(
                    Diag(hit.range, Severity.error, "torch-op", _vendor_message(hit.shown, ctx))
                )
            elif hit.canonical not in noted and (ctx.reference is None or ctx.reference.ops):
                noted.add(hit.canonical)
                ctx.diags.append(
                    Diag(
                        hit.range,
                        Severity.information,
                        "torch-op",
                        f"`{hit.shown}` runs the {_family_text(hit)} on the vendor library; the "
                        "custom CUDA covers the rest of the reference (verify reports the share "
                        "of the GPU time each side runs)",
                    )
                )
            continue
        plain = _plain(hit.shown, hit.canonical) and hit.how != "value"
        who = (
            f"`{hit.shown}`"
            if _plain(hit.shown, hit.canonical)
            else (f"`{hit.shown}` is `{hit.canonical}`")
        )
        if hit.how == "value":
            who += ", handed over to be called"
        family = op_family(hit.canonical)
        if hit.how == "aten" and not ctx.extension_kernels:
            sev, msg = (
                Severity.error,
                f"{who} runs PyTorch's operator inside the extension and no custom CUDA kernel is "
                "launched: this is PyTorch, not a CUDA implementation",
            )
        elif hit.how != "aten" and not ctx.uses_cuda:
            sev = Severity.error
            msg = (
                f"{who} runs in PyTorch and {_why_no_cuda(ctx)}"
                if plain
                else f"{who}: PyTorch compute in ModelNew, and {_why_no_cuda(ctx)}"
            )
        elif family in whole:
            sev, msg = Severity.error, _whole_message(who, ctx)
        elif hit.weight == "light":
            sev = Severity.warning
            msg = (
                f"{who} is left in PyTorch: fuse it into the CUDA kernel"
                if plain
                else f"{who}: PyTorch compute left in ModelNew: fuse it into the CUDA kernel"
            )
        else:
            sev, msg = (
                Severity.information,
                f"{who} stays on PyTorch's vendor library (cuBLAS/cuDNN); the custom CUDA covers "
                "the rest",
            )
        ctx.diags.append(Diag(hit.range, sev, "torch-op", msg))


def _family_text(hit: TorchHit) -> str:
    families = hit_families(hit)
    if families == {"gemm"}:
        return "GEMM"
    return "convolution" if all(f.startswith("conv") for f in families) else "heavy op"


def _vendor_message(call: str, ctx: CandidateContext) -> str:
    ops = ", ".join(f"`{s}`" for s in (ctx.reference.shown if ctx.reference else ())) or "it"
    return (
        f"`{call}` is the vendor library doing the whole problem (the reference is only {ops}); "
        "the custom CUDA around it can only copy, scale or finish the library's result: this is "
        "not a CUDA implementation"
    )


def _whole_message(name: str, ctx: CandidateContext) -> str:
    ops = ", ".join(f"`{s}`" for s in (ctx.reference.shown if ctx.reference else ())) or "it"
    return (
        f"{name}: PyTorch does the whole problem (the reference is only {ops}), and the custom "
        "CUDA around it can only copy or scale PyTorch's result: this is not a CUDA implementation"
    )


# -- reference, fallbacks, caches, downcasts ---------------------------------------------------


def _check_inheritance(ctx: CandidateContext) -> None:
    for cls in ctx.candidates:
        sup = cls.node.child_by_field_name("superclasses")
        if sup is None:
            continue
        for base in sup.named_children:
            if base.type == "keyword_argument":
                continue
            if text(base) in ctx.reference_names or _is_reference(ctx, ctx.resolver.resolve(base)):
                ctx.add(
                    base,
                    Severity.error,
                    "reference-call",
                    f"`{cls.name}` inherits from the reference `{text(base)}`: "
                    "it can run the reference's forward instead of its own kernels",
                )


def _reference_hit(ctx: CandidateContext, call: Call, ref_attrs: set[str]) -> str | None:
    c = call.callee
    fn = call.node.child_by_field_name("function")
    if fn is not None and fn.type == "call":
        return None  # `Model()(x)`: the inner call is the one reported
    if re.match(r"^super\(.*\)\.forward$", c):
        return "calls the parent class's forward"
    if any(c in (r, f"{r}.forward", f"{r}.__call__") for r in ctx.reference_names):
        return f"calls the reference `{c}`"
    if c in ref_attrs or any(c == f"{a}.forward" for a in ref_attrs):
        return f"runs the reference model held in `{c}`"
    if _is_reference(ctx, call.ref):
        return f"`{c}` is the reference `{call.ref.name if call.ref else c}`; it"
    return None


def _check_reference_calls(ctx: CandidateContext, calls: list[Call], ref_attrs: set[str]) -> None:
    for call in calls:
        hit = _reference_hit(ctx, call, ref_attrs)
        if hit:
            ctx.add(
                call.node,
                Severity.error,
                "reference-call",
                f"{hit}: that is the reference's computation, not a CUDA implementation",
            )


def _inside(node: Node, outer: Node) -> bool:
    return outer.start_byte <= node.start_byte and node.end_byte <= outer.end_byte


def _fallback_call(
    ctx: CandidateContext, fn: Node, node: Node, ref_attrs: set[str], depth: int = 0
) -> str | None:
    """What the first call under `node` runs when it is PyTorch compute or the reference,
    looking into this file's functions and lambdas it calls."""
    for call in ctx.calls(fn):
        if not _inside(call.node, node):
            continue
        if _reference_hit(ctx, call, ref_attrs) is not None:
            return call.callee
        hit = classify_resolved(call.callee, call.ref, ctx.extension_handles)
        if hit is not None:
            return call.callee if _plain(hit[1], hit[2]) else f"{call.callee}` is `{hit[2]}"
        target = call.ref.node if call.ref is not None else None
        if target is not None and target.type in ("function_definition", "lambda") and depth < 2:
            inner = _fallback_call(ctx, target, target, ref_attrs, depth + 1)
            if inner is not None:
                return f"{call.callee}` runs `{inner}"
    return None


def _mentions_handle(ctx: CandidateContext, node: Node) -> bool:
    names = {re.sub(r"\(.*?\)", "", t) for t in _NAME.findall(text(node))}
    return any(is_handle_use(n, ctx.extension_handles) for n in names)


def _check_fallbacks(ctx: CandidateContext, fn: Node, ref_attrs: set[str]) -> None:
    found = ctx.body(fn)
    for clause in found.get("except", []):
        call = _fallback_call(ctx, fn, clause, ref_attrs)
        if call is not None:
            ctx.add(
                clause.child(0) or clause,
                Severity.error,
                "torch-fallback",
                f"except falls back to PyTorch (`{call}`): a failing kernel would "
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
            call = _fallback_call(ctx, fn, branch, ref_attrs)
            if call is not None:
                ctx.add(
                    stmt.child(0) or stmt,
                    Severity.error,
                    "torch-fallback",
                    f"when the CUDA extension is unavailable this falls back to PyTorch "
                    f"(`{call}`): the result would not come from the kernel",
                )
                break


def _identifiers(node: Node, name: str) -> list[Node]:
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in ("identifier", "attribute") and text(n) == name:
            out.append(n)
            if n.type == "attribute":
                continue
        stack.extend(n.children)
    return out


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
        c, d = call.callee, call.canonical
        pointer = c.endswith(".data_ptr") or d.endswith(".data_ptr")
        identity = d in ("id", "hash", "builtins.id", "builtins.hash")
        if not (pointer or identity):
            continue
        if identity and not call.args.named_children:
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


def _low_precision_arg(ctx: CandidateContext, call: Call) -> bool:
    if _DOWNCAST.search(text(call.args)):
        return True
    for arg in call.args.named_children:
        value = arg.child_by_field_name("value") if arg.type == "keyword_argument" else arg
        ref = ctx.resolver.resolve(value)
        if ref is None:
            continue
        if ref.dotted is not None and _LOW_DTYPE.match(ref.dotted):
            return True
        if ref.string is not None and _DOWNCAST.search(ref.string):
            return True
    return False


def _check_downcast(ctx: CandidateContext, calls: list[Call]) -> None:
    if not ctx.reference_fp32:
        return
    for call in calls:
        c, d = call.callee, call.canonical
        hit = (
            c.endswith((".half", ".bfloat16"))
            or d.endswith((".half", ".bfloat16"))
            or (c.endswith((".to", ".type")) and _low_precision_arg(ctx, call))
            or bool(re.search(r"(^|\.)autocast$", c) or re.search(r"(^|\.)autocast$", d))
            or (d == "torch.set_default_dtype" and _low_precision_arg(ctx, call))
        )
        if hit:
            shown = text(call.node)[:60]
            resolved = "" if d == c or "." not in d or "()" in d else f" (`{c}` is `{d}`)"
            ctx.add(
                call.node,
                Severity.warning,
                "downcast",
                f"`{shown}`{resolved} lowers fp32 work to 16-bit: the reference is fp32, "
                "so this is a different (less precise) computation",
            )


def reference_is_low_precision(source: str) -> bool:
    return bool(_REFERENCE_LOW_PRECISION.search(source))


def extension_ctor(callee: str) -> bool:
    return bool(_EXTENSION_CTORS.search(callee))
