"""Checks for tricks that fake speed or hide who does the work, seen through name resolution:
patched timers, side streams, threads and processes, TF32, `torch.compile`/`torch.jit`, lazy
tensor subclasses, memoised results, and compute moved to the CPU.

Timers, streams, threads, TF32, compilation and tensor subclasses are looked for anywhere in a
candidate file (outside the reference class); memoisation and CPU compute in the code forward
reaches. A byte search over the file finds the statements that can match, so a keystroke in a
large file costs little.
"""

from __future__ import annotations

import re

from tree_sitter import Node

from stitch_lsp.analysis import grammars
from stitch_lsp.analysis.names import Ref, Resolver, param_nodes
from stitch_lsp.analysis.python_checks import (
    CandidateContext,
    names_read,
    parameter_only_locals,
)
from stitch_lsp.analysis.python_facts import param_names
from stitch_lsp.analysis.syntax import text
from stitch_lsp.analysis.torch_ops import is_handle_use
from stitch_lsp.models.findings import Severity

_TIMER_ATTRS = frozenset(
    {"record", "elapsed_time", "synchronize", "perf_counter", "perf_counter_ns"}
)
_TIMER_NAMES = re.compile(
    r"record|elapsed_time|synchronize|perf_counter|monotonic|\btime\b|\btime_ns\b|Event"
)
_STREAM_APIS = re.compile(
    r"^(torch\.cuda\.(streams\.)?(Stream|ExternalStream|stream|set_stream|StreamContext"
    r"|_set_stream_by_id)|torch\.(Stream|StreamContext|accelerator\.set_stream)"
    r"|cupy\.cuda\.(stream\.)?(Stream|ExternalStream))$|(^|\.)cuStreamCreate\w*$"
    r"|(^|\.)cudaStreamCreate\w*$"
)
_THREAD_APIS = re.compile(
    r"^(threading\.(Thread|Timer)|_thread\.(start_new_thread|start_new)"
    r"|concurrent\.futures(\.thread|\.process)?\.(ThreadPoolExecutor|ProcessPoolExecutor)"
    r"|(torch\.)?multiprocessing(\.\w+)*\.(Process|Pool|ThreadPool|spawn|start_processes)"
    r"|os\.(fork|forkpty|posix_spawn\w*|spawn\w*)|asyncio\.to_thread)$"
)
_COMPILE_APIS = re.compile(
    r"^torch\.(compile|jit\.(script|trace|trace_module|freeze|optimize_for_inference|fork)"
    r"|_dynamo\.\w+|compiler\.\w+|_inductor\.\w+|_export\.aot_compile|cuda\.make_graphed_callables)$"
)
_SUBCLASS_APIS = re.compile(r"(^|\.)(_make_subclass|_make_wrapper_subclass|as_subclass)$")
_LAZY_BASES = re.compile(
    r"^torch\.(Tensor|_C\.(_TensorBase|TensorBase)|nn\.Parameter"
    r"|utils\._python_dispatch\.TorchDispatchMode|overrides\.TorchFunctionMode)$"
    r"|(^|\.)(TorchDispatchMode|TorchFunctionMode)$"
)
_MEMO_DECORATORS = re.compile(r"^(functools\.)?(lru_cache|cache|cached_property)$")
_HOST_METHODS = frozenset({"cpu", "numpy", "tolist"})
_SIZE_ATTRS = frozenset(
    {"shape", "ndim", "dtype", "device", "is_cuda", "size", "numel", "dim", "stride",
     "element_size", "is_contiguous", "data_ptr", "nbytes", "itemsize"}
)  # fmt: skip
_VALUE_KEYS = re.compile(r"\.(tolist|item|numpy|tobytes|cpu|sum|mean|flatten)\(|\b(hash|id)\(")

# What harnesses compare and time with; replacing any of them from the candidate is cheating.
_HARNESS_NAMES = (
    "allclose", "isclose", "assert_close", "assert_allclose", "equal", "testing", "__eq__",
    "__ne__", "__sub__", "__abs__", "abs", "isnan", "isfinite", "nan_to_num", "builtins",
    "Tensor.", "max", "all", "item",
)  # fmt: skip
# Modules whose attributes a candidate has no business assigning: PyTorch (its configuration
# flags in torch.backends aside: TF32 is checked on its own), the clocks, numpy, the harness.
_HARNESS_MODULES = re.compile(
    r"^(torch(?!\.backends)(\.\w+)*|time|builtins|numpy(\.\w+)*|np|stitch_lsp(\.\w+)*"
    r"|kernelbench(\.\w+)*|src\.eval)$"
)

# Where the file-wide checks can match; names bound to these APIs are added per file.
_HINTS = (
    b"record",
    b"elapsed_time",
    b"synchronize",
    b"perf_counter",
    b"monotonic",
    b"Event",
    b"setattr",
    b"patch",
    b"__dict__",
    b"vars(",
    b"sys.modules",
    b"Stream",
    b"stream",
    b"Thread",
    b"Timer",
    b"Executor",
    b"Process",
    b"Pool(",
    b"ThreadPool",
    b"fork",
    b"spawn",
    b"start_new",
    b"to_thread",
    b"tf32",
    b"_matmul_precision",
    b"fp32_precision",
    b"compile",
    b"jit",
    b"_dynamo",
    b"_inductor",
    b"graphed_callables",
    b"subclass",
    b"__torch_function__",
    b"__torch_dispatch__",
    b"Mode",
    b"getattr(",
    *(n.encode() for n in _HARNESS_NAMES),
)
# `class X(torch.Tensor)`: only class lines that name a Tensor in their bases.
_SUBCLASS_LINE = re.compile(rb"class\s+\w+\s*\([^)\n]*Tensor")
_INTERESTING = re.compile(
    "|".join(
        p.pattern for p in (_STREAM_APIS, _THREAD_APIS, _COMPILE_APIS, _SUBCLASS_APIS, _LAZY_BASES)
    )
    + r"|set_float32_matmul_precision$|(^|\.)setattr$|_python_dispatch|overrides"
)


def _alias_hints(resolver: Resolver) -> tuple[bytes, ...]:
    """Module-level names bound to an API the file-wide checks look for (`from torch.cuda
    import Stream as X`, `S = getattr(torch.cuda, "Stream")`): their uses must be looked at
    too, though they do not spell the API's name."""
    out: list[bytes] = []
    for name, binds in resolver.module_bindings().items():
        if name == "*" or not any(b.kind in ("import", "value") for b in binds):
            continue
        for b in binds:
            if b.kind == "import":
                dotted = str(b.payload)
            elif b.kind == "value" and isinstance(b.payload, Node):
                if b.payload.type not in ("identifier", "attribute", "call", "subscript"):
                    continue
                ref = resolver.resolve(b.payload)
                dotted = ref.dotted if ref is not None and ref.dotted else ""
            else:
                continue
            if dotted and _INTERESTING.search(dotted):
                out.append(name.encode())
                break
    return tuple(out)


def _outside_reference(ctx: CandidateContext, node: Node) -> bool:
    for name in ctx.reference_names:
        cls = ctx.facts.cls(name)
        if cls is not None and cls.node.start_byte <= node.start_byte < cls.node.end_byte:
            return False
    return True


def check_file_wide(ctx: CandidateContext, roots: list[Node], data: bytes) -> None:
    """Timer patching, side streams, threads, TF32, compilation and lazy tensors, anywhere in a
    candidate file."""
    needles = _HINTS + _alias_hints(ctx.resolver)
    hits = grammars.find_in_runs(roots, data, needles, _SUBCLASS_LINE)
    statements = grammars.statements_at(roots, hits)
    found = grammars.captures_in("python", "candidate", statements)
    _timer_patches(ctx, found)
    _harness_patches(ctx, found)
    calls: dict[int, Node] = {}
    for stmt in statements:
        for call in grammars.captures("python", "function_body", stmt).get("call", []):
            calls[call.id] = call
    for _, fn in ctx.code:  # names bound inside functions (`S = torch.cuda.Stream` in forward)
        for resolved in ctx.calls(fn):
            calls.setdefault(resolved.node.id, resolved.node)
    for call in sorted(calls.values(), key=lambda n: n.start_byte):
        if _outside_reference(ctx, call):
            _call_tricks(ctx, call)
    for deco in found.get("decorator", []):
        if _outside_reference(ctx, deco):
            _decorator_tricks(ctx, deco)
    if ctx.reference_fp32:
        _tf32_assignments(ctx, found)
    _lazy_tensors(ctx, found)


def _timer_patches(ctx: CandidateContext, found: dict[str, list[Node]]) -> None:
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
        items = args.named_children[:2]
        names = " ".join(text(a) for a in items)
        refs = [ctx.resolver.resolve(a) for a in items]
        names += " " + " ".join(r.name for r in refs if r is not None)
        if _TIMER_NAMES.search(names) and re.search(r"torch|time|cuda|Event", names):
            ctx.add(
                call,
                Severity.error,
                "timer-patch",
                "patches a timer or synchronisation function: the measurement would be fake",
            )
    for target in found.get("dictpatch", []):
        key = text(target)
        if _TIMER_NAMES.search(key) or "time" in key or "torch" in key:
            ctx.add(
                target,
                Severity.error,
                "timer-patch",
                f"replaces `{key}` through a module's namespace: patching timing or "
                "synchronisation fakes the measurement",
            )


def _harness_object(ctx: CandidateContext, node: Node | None) -> str | None:
    """The module or class a harness relies on that `node` names (`torch`, `torch.testing`,
    `torch.Tensor`, `time`), through aliases; None for anything else."""
    if node is None:
        return None
    ref = ctx.resolver.resolve(node)
    if ref is None or ref.instance or ref.dotted is None or "()" in ref.dotted:
        return None
    return ref.dotted if _HARNESS_MODULES.match(ref.dotted) else None


def _harness_patches(ctx: CandidateContext, found: dict[str, list[Node]]) -> None:
    """Assignments over, and setattr on, PyTorch's and the harness's functions."""
    for target, obj, attr in zip(
        found.get("gpatch.target", []),
        found.get("gpatch.object", []),
        found.get("gpatch.attr", []),
        strict=False,
    ):
        name = text(attr)
        owner = _harness_object(ctx, obj)
        if owner is None or name in _TIMER_ATTRS or not _outside_reference(ctx, target):
            continue  # timers are the timer-patch check's
        shown = text(target)
        also = "" if shown == f"{owner}.{name}" else f" (`{owner}.{name}`)"
        ctx.add(
            target,
            Severity.error,
            "harness-patch",
            f"assigns over `{shown}`{also}: replacing PyTorch's or the harness's functions can "
            "make a wrong result compare equal or a slow one time fast",
        )
    for call, args in zip(found.get("setattr", []), found.get("setattr.args", []), strict=False):
        items = args.named_children
        if len(items) < 2 or not _outside_reference(ctx, call):
            continue
        owner = _harness_object(ctx, items[0])
        named = ctx.resolver.string(items[1])
        if owner is None or (named is not None and named in _TIMER_ATTRS):
            continue
        what = f"`{owner}.{named}`" if named else f"an attribute of `{owner}` named at run time"
        ctx.add(
            call,
            Severity.error,
            "harness-patch",
            f"`setattr` replaces {what}: replacing PyTorch's or the harness's functions can "
            "make a wrong result compare equal or a slow one time fast",
        )


def _shown(node: Node, ref: Ref | None) -> str:
    callee = text(node)
    if ref is None or ref.dotted is None or ref.dotted == callee or "()" in ref.dotted:
        return f"`{callee}`"
    return f"`{callee}` (`{ref.dotted}`)"


def _call_tricks(ctx: CandidateContext, call: Node) -> None:
    fn = call.child_by_field_name("function")
    if fn is None:
        return
    ref = ctx.resolver.resolve(fn)
    dotted = ref.dotted if ref is not None and ref.dotted else text(fn)
    if ref is not None and ref.instance:
        return  # a call of something returned by a call: not the API itself
    if dotted in ("getattr", "builtins.getattr"):
        _computed_cuda_lookup(ctx, call)
        return
    if _STREAM_APIS.search(dotted):
        if dotted.endswith("cuda.stream") and "current_stream" in text(call):
            return  # entering the current stream changes nothing
        ctx.add(
            call,
            Severity.warning,
            "side-stream",
            f"{_shown(fn, ref)} uses a CUDA stream other than the current one: work there is "
            "invisible to the benchmark's events; launch on torch.cuda.current_stream()",
        )
    elif _THREAD_APIS.match(dotted) or dotted.endswith(".run_in_executor"):
        ctx.add(
            call,
            Severity.error,
            "threads",
            f"{_shown(fn, ref)} starts a thread or process: work outside the timed call does "
            "not count",
        )
    elif _COMPILE_APIS.match(dotted):
        ctx.add(
            call,
            Severity.error,
            "torch-op",
            f"{_shown(fn, ref)} has PyTorch generate the kernels (TorchInductor/Triton or "
            "TorchScript): that is PyTorch doing the work, not a CUDA implementation",
        )
    elif _SUBCLASS_APIS.search(dotted):
        ctx.add(
            call,
            Severity.error,
            "lazy-tensor",
            f"{_shown(fn, ref)} makes a tensor subclass: its values can be computed when read, "
            "after the timer stopped",
        )
    elif ctx.reference_fp32 and dotted.endswith("set_float32_matmul_precision"):
        args = call.child_by_field_name("arguments")
        first = args.named_children[0] if args is not None and args.named_children else None
        value = ctx.resolver.string(first) if first is not None else None
        if value != "highest":
            _tf32(ctx, call)
    elif ctx.reference_fp32 and ("allow_tf32" in text(call) or "fp32_precision" in text(call)):
        args = call.child_by_field_name("arguments")
        for arg in args.named_children if args is not None else []:
            if (
                arg.type == "keyword_argument"
                and text(arg.child_by_field_name("name")) in ("allow_tf32", "fp32_precision")
                and _enables(ctx, arg.child_by_field_name("value"))
            ):
                _tf32(ctx, arg)
        if dotted.endswith("setattr") and args is not None and len(args.named_children) >= 3:
            name = ctx.resolver.string(args.named_children[1])
            if name in ("allow_tf32", "fp32_precision") and _enables(ctx, args.named_children[2]):
                _tf32(ctx, call)


def _computed_cuda_lookup(ctx: CandidateContext, call: Node) -> None:
    """`getattr(torch.cuda, NAME)` with a name built at run time: whatever it fetches (a
    `Stream`, a timer) is hidden from every check that looks for it by name."""
    args = call.child_by_field_name("arguments")
    items = args.named_children if args is not None else []
    if len(items) < 2 or ctx.resolver.string(items[1]) is not None:
        return
    ref = ctx.resolver.resolve(items[0])
    owner = ref.dotted if ref is not None and not ref.instance else None
    if owner not in ("torch.cuda", "torch.cuda.streams", "torch.cuda.Stream"):
        return
    ctx.add(
        call,
        Severity.warning,
        "side-stream",
        f"`{text(call)[:50]}` fetches from `{owner}` by a name built at run time: a stream (or "
        "a timer) used under a hidden name escapes the checks; name what you use",
    )


def _decorator_tricks(ctx: CandidateContext, deco: Node) -> None:
    expr = next((c for c in deco.named_children if c.type != "comment"), None)
    if expr is None:
        return
    if expr.type == "call":
        expr = expr.child_by_field_name("function") or expr
    ref = ctx.resolver.resolve(expr)
    dotted = ref.dotted if ref is not None and ref.dotted else text(expr)
    if _COMPILE_APIS.match(dotted):
        ctx.add(
            deco,
            Severity.error,
            "torch-op",
            f"{_shown(expr, ref)} has PyTorch generate the kernels (TorchInductor/Triton or "
            "TorchScript): that is PyTorch doing the work, not a CUDA implementation",
        )


def _enables(ctx: CandidateContext, value: Node | None) -> bool:
    """Whether a value assigned to `allow_tf32` / `fp32_precision` turns reduced precision on."""
    if value is None:
        return False
    if value.type in ("false", "none"):
        return False
    if value.type == "integer" and text(value) == "0":
        return False
    s = ctx.resolver.string(value)
    if s is not None:
        return "tf32" in s.lower() or s.lower() in ("high", "medium")
    return value.type != "false"


def _tf32(ctx: CandidateContext, node: Node) -> None:
    ctx.add(
        node,
        Severity.warning,
        "downcast",
        "lets fp32 matmuls run in TF32 (10-bit mantissa): the reference is full fp32, "
        "and TF32 only passes because the tolerance is loose",
    )


def _tf32_assignments(ctx: CandidateContext, found: dict[str, list[Node]]) -> None:
    for node, value in zip(found.get("tf32", []), found.get("tf32.value", []), strict=False):
        if _enables(ctx, value):
            _tf32(ctx, node)


def _lazy_tensors(ctx: CandidateContext, found: dict[str, list[Node]]) -> None:
    for cls, bases in zip(found.get("class", []), found.get("class.bases", []), strict=False):
        for base in bases.named_children:
            if base.type == "keyword_argument":
                continue
            ref = ctx.resolver.resolve(base)
            dotted = ref.dotted if ref is not None and ref.dotted else text(base)
            if _LAZY_BASES.search(dotted) and dotted != "torch.nn.Parameter":
                name = cls.child_by_field_name("name") or cls
                ctx.add(
                    name,
                    Severity.error,
                    "lazy-tensor",
                    f"`{text(name)}` subclasses `{dotted}`: a tensor subclass or dispatch mode "
                    "can compute its values when they are read, after the timer stopped",
                )
                break
    for fn in found.get("torch_hook", []):
        name = fn.child_by_field_name("name") or fn
        ctx.add(
            name,
            Severity.error,
            "lazy-tensor",
            f"`{text(name)}` intercepts PyTorch's operators: results can be computed lazily, "
            "outside the timed call",
        )


# -- memoisation and CPU compute in the code forward reaches ------------------------------------


def _decorators(fn: Node) -> list[Node]:
    parent = fn.parent
    if parent is None or parent.type != "decorated_definition":
        return []
    return [c for c in parent.named_children if c.type == "decorator"]


def _input_names(fn: Node) -> set[str]:
    return {p.lstrip("*") for p in param_names(fn) if p not in ("self", "cls")}


def check_memoisation(ctx: CandidateContext) -> None:
    """lru_cache on forward or on a helper given tensors, and dicts on the module keyed on the
    inputs whose stored value forward returns."""
    called_with: dict[int, list[Node]] = {}
    for _, fn in ctx.code:
        for call in ctx.calls(fn):
            if call.ref is not None and call.ref.node is not None:
                called_with.setdefault(call.ref.node.id, []).append(call.node)
    for owner, fn in ctx.code:
        name = text(fn.child_by_field_name("name"))
        for deco in _decorators(fn):
            expr = deco.named_children[0] if deco.named_children else deco
            if expr.type == "call":
                expr = expr.child_by_field_name("function") or expr
            ref = ctx.resolver.resolve(expr)
            dotted = ref.dotted if ref is not None and ref.dotted else text(expr)
            if not _MEMO_DECORATORS.match(dotted):
                continue
            keyed = name == "forward" and owner is not None
            for site in called_with.get(fn.id, []):
                if _tensorish_arguments(ctx, site):
                    keyed = True
            if keyed:
                shown = "@" + text(deco.named_children[0] if deco.named_children else deco)
                ctx.add(
                    deco,
                    Severity.error,
                    "input-cache",
                    f"`{shown[:40]}` on `{name}` memoises results keyed on the tensors it is "
                    "given: a repeated input skips the work",
                )
        _memo_dicts(ctx, fn)


def _tensorish_arguments(ctx: CandidateContext, call: Node) -> bool:
    """Whether a call passes a tensor (an input, or anything not computed from sizes alone)
    or a key made from tensor values (`.tolist()`, `.item()`, `hash(x)`)."""
    caller = Resolver.scope_of(call)
    inputs = _input_names(caller) if caller is not None else set()
    args = call.child_by_field_name("arguments")
    for arg in args.named_children if args is not None else []:
        value = arg.child_by_field_name("value") if arg.type == "keyword_argument" else arg
        if value is None:
            continue
        if _VALUE_KEYS.search(text(value)):
            return True
        if value.type == "identifier" and text(value) in inputs:
            return True
    return False


_LOOKUP_METHODS = frozenset({"get", "setdefault", "__getitem__", "pop"})


_MUTABLE_CTORS = re.compile(r"^(builtins\.)?(dict|list|set)$|^collections\.\w+$")


def _mutable_default(ctx: CandidateContext, value: Node | None) -> bool:
    """`{}`, `[]`, `set()`, `collections.OrderedDict()`: a default made once, at `def` time."""
    if value is None:
        return False
    if value.type in ("dictionary", "list", "set"):
        return True
    if value.type == "call":
        ref = ctx.resolver.resolve(value.child_by_field_name("function"))
        dotted = ref.dotted if ref is not None and ref.dotted else ""
        return bool(_MUTABLE_CTORS.match(dotted))
    return False


def _persistent(ctx: CandidateContext, container: Node, fn: Node) -> str | None:
    """Where a container lives when it outlives the call (None when it does not): on the
    module (`self._cache`), at module level, on a function or class of the file
    (`_apply.results`), in an enclosing function (a closure), or in a mutable default argument
    (`_memo={}`, made once when the `def` ran)."""
    if container.type == "attribute":
        obj = container.child_by_field_name("object")
        if obj is None:
            return None
        if text(obj) in ("self", "cls", "type(self)", "self.__class__"):
            return "on the module"
        ref = ctx.resolver.resolve(obj)
        if (
            ref is not None
            and ref.node is not None
            and not ref.instance
            and ref.node.type in ("function_definition", "class_definition")
        ):
            return f"on `{text(obj)}` itself"
        return None
    if container.type == "identifier":
        name = text(container)
        defaults = dict(param_nodes(fn))
        if name in defaults:
            mutable = _mutable_default(ctx, defaults[name])
            return "in a mutable default argument" if mutable else None
        local = ctx.resolver._local_bindings(fn).get(name)
        if local and not any(b.kind == "global" for b in local):
            return None
        if name in ctx.resolver.module_bindings():
            return "at module level"
        outer = Resolver.scope_of(fn)
        while outer is not None:  # a free variable of a closure: it lives as long as the closure
            if name in ctx.resolver._local_bindings(outer):
                return f"in the closure of `{text(outer.child_by_field_name('name'))}`"
            outer = Resolver.scope_of(outer)
    return None


def _memo_dicts(ctx: CandidateContext, fn: Node) -> None:
    body = fn.child_by_field_name("body")
    if body is None or fn.type == "lambda":
        return
    static = parameter_only_locals(fn) | {"self", "cls"}
    lookups: list[tuple[Node, Node, Node]] = []  # (lookup expr, container, key)
    stack = [body]
    while stack:
        n = stack.pop()
        if n.type in ("function_definition", "class_definition", "lambda"):
            continue
        if n.type == "subscript":
            parent = n.parent
            is_target = (
                parent is not None
                and parent.type in ("assignment", "augmented_assignment")
                and parent.child_by_field_name("left") == n
            )
            value, key = n.child_by_field_name("value"), n.child_by_field_name("subscript")
            if not is_target and value is not None and key is not None:
                lookups.append((n, value, key))
        elif n.type == "call":
            callee = n.child_by_field_name("function")
            args = n.child_by_field_name("arguments")
            if (
                callee is not None
                and callee.type == "attribute"
                and text(callee.child_by_field_name("attribute")) in _LOOKUP_METHODS
                and args is not None
                and args.named_children
            ):
                container = callee.child_by_field_name("object")
                if container is not None:
                    lookups.append((n, container, args.named_children[0]))
        elif n.type == "comparison_operator" and "in" in [c.type for c in n.children]:
            parts = n.named_children
            if len(parts) == 2:
                lookups.append((n, parts[1], parts[0]))
        stack.extend(n.named_children)
    if not lookups:
        return
    returned = _returned_names(body)
    for expr, container, key in sorted(lookups, key=lambda item: item[0].start_byte):
        where = _persistent(ctx, container, fn)
        if where is None or not _depends_on_inputs(ctx, fn, key, static):
            continue
        if expr.type == "comparison_operator":
            guarded = _guarded_return(expr)
            if not guarded:
                continue
        elif not (_in_return(expr) or _assigned_name(expr) in returned):
            continue
        ctx.add(
            expr,
            Severity.error,
            "input-cache",
            f"`{text(expr)[:50]}` looks up a result kept {where} between calls, keyed on the "
            f"input (`{text(key)[:30]}`): a repeated input returns the stored output and skips "
            "the work",
        )
        return


def _depends_on_inputs(ctx: CandidateContext, fn: Node, key: Node, static: set[str]) -> bool:
    names = names_read(key)
    if not names:
        return False
    key_text = text(key)
    if key.type == "identifier":  # key = (x.shape, x.sum().item()); cache[key]
        assigned = _assignment_of(fn, key_text, key)
        if assigned is None:
            return False
        return _depends_on_inputs(ctx, fn, assigned, static)
    return any(n not in static and n not in ctx.resolver.module_aliases() for n in names)


def _assignment_of(fn: Node, name: str, before: Node) -> Node | None:
    found = None
    stack = [fn.child_by_field_name("body")]
    while stack:
        n = stack.pop()
        if n is None or n.type in ("function_definition", "class_definition", "lambda"):
            continue
        if n.type == "assignment" and n.start_byte < before.start_byte:
            left = n.child_by_field_name("left")
            if (
                left is not None
                and text(left) == name
                and (found is None or n.start_byte > found.start_byte)
            ):
                found = n
        stack.extend(n.named_children)
    return found.child_by_field_name("right") if found is not None else None


def _returned_names(body: Node) -> set[str]:
    out: set[str] = set()
    stack = [body]
    while stack:
        n = stack.pop()
        if n.type in ("function_definition", "class_definition", "lambda"):
            continue
        if n.type == "return_statement" and n.named_children:
            value = n.named_children[0]
            items = value.named_children if value.type in ("tuple", "expression_list") else [value]
            out.update(text(i) for i in items if i.type == "identifier")
        stack.extend(n.named_children)
    return out


def _in_return(node: Node) -> bool:
    parent = node.parent
    while parent is not None and parent.type in ("tuple", "expression_list",
                                                 "parenthesized_expression"):  # fmt: skip
        parent = parent.parent
    return parent is not None and parent.type == "return_statement"


def _assigned_name(node: Node) -> str | None:
    parent = node.parent
    if (
        parent is not None
        and parent.type == "assignment"
        and parent.child_by_field_name("right") == node
    ):
        left = parent.child_by_field_name("left")
        return text(left) if left is not None and left.type == "identifier" else None
    return None


def _guarded_return(test: Node) -> bool:
    """`if key in self.cache: return ...`"""
    parent = test.parent
    while parent is not None and parent.type in ("parenthesized_expression", "boolean_operator"):
        parent = parent.parent
    if parent is None or parent.type != "if_statement":
        return False
    body = parent.child_by_field_name("consequence")
    return body is not None and any(c.type == "return_statement" for c in body.named_children)


_STACK_APIS = re.compile(
    r"^(inspect\.(stack|currentframe|getouterframes|getframeinfo|trace)"
    r"|sys\.(_getframe|_current_frames)|traceback\.(extract_stack|walk_stack|format_stack"
    r"|print_stack))$"
)


def check_call_count(ctx: CandidateContext) -> None:
    """Code forward reaches that reads the call stack, or counts its calls and branches on the
    count: the timed calls (the later ones, or those under a timing function) need not do the
    work the correctness trials checked."""
    counters: dict[str, tuple[Node, str]] = {}
    conditions: list[Node] = []
    for _, fn in ctx.code:
        for call in ctx.calls(fn):
            if _STACK_APIS.match(call.canonical):
                ctx.add(
                    call.node,
                    Severity.warning,
                    "call-count",
                    f"`{text(call.node)[:40]}` reads the call stack: forward can tell who calls "
                    "it (a timing loop) and do other work then than when it is checked",
                )
        body = fn.child_by_field_name("body")
        stack = [body] if body is not None else []
        while stack:
            n = stack.pop()
            if n.type in ("function_definition", "class_definition"):
                continue
            if n.type == "augmented_assignment":
                left = n.child_by_field_name("left")
                op = n.child_by_field_name("operator")
                if left is not None and op is not None and text(op) in ("+=", "-="):
                    where = _persistent(ctx, left, fn)
                    if where is not None:
                        counters.setdefault(text(left), (n, where))
            elif n.type in ("if_statement", "elif_clause", "while_statement"):
                cond = n.child_by_field_name("condition")
                if cond is not None:
                    conditions.append(cond)
            elif n.type == "conditional_expression" and len(n.named_children) == 3:
                conditions.append(n.named_children[1])
            stack.extend(n.named_children)
    if not counters:
        return
    for cond in sorted(conditions, key=lambda c: c.start_byte):
        for comparison in _comparisons(cond):
            used = {text(c) for c in comparison.named_children}
            hit = next((name for name in counters if name in used), None)
            if hit is None:
                continue
            ctx.add(
                comparison,
                Severity.warning,
                "call-count",
                f"`{text(comparison)[:40]}` branches on `{hit}`, a call counter kept "
                f"{counters[hit][1]}: forward does other work after some number of calls than "
                "when its results were checked",
            )
            break


def check_event_joins(ctx: CandidateContext) -> None:
    """`ev.record(side)`, then the work, then `current.wait_event(ev)`: the event marks the
    point before the work, so the wait joins nothing and the work escapes the timer."""
    for _, fn in ctx.code:
        records: list[tuple[int, str]] = []
        waits: list[tuple[Node, str]] = []
        work: list[int] = []
        for call in ctx.calls(fn):
            callee = call.node.child_by_field_name("function")
            if callee is not None and callee.type == "attribute":
                obj = text(callee.child_by_field_name("object"))
                method = text(callee.child_by_field_name("attribute"))
                args = call.args.named_children
                if method == "record":
                    records.append((call.node.start_byte, obj))
                    continue
                if method == "wait_event" and args:
                    waits.append((call.node, text(args[0])))
                    continue
                if method == "wait" and any(obj == r for _, r in records):
                    waits.append((call.node, obj))
                    continue
            target = call.ref.node if call.ref is not None else None
            if is_handle_use(call.callee, ctx.extension_handles) or (
                target is not None and target.type == "function_definition"
            ):
                work.append(call.node.start_byte)
        for node, event in waits:
            before = [at for at, name in records if name == event and at < node.start_byte]
            if before and any(max(before) < at < node.start_byte for at in work):
                ctx.add(
                    node,
                    Severity.warning,
                    "event-join",
                    f"waits on `{event}`, recorded before the work it should wait for: the join "
                    "is fake and that work escapes the timer",
                )


def _comparisons(node: Node) -> list[Node]:
    out = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "comparison_operator":
            out.append(n)
        stack.extend(n.named_children)
    return out


def check_cpu_compute(ctx: CandidateContext) -> None:
    """Tensor values moved to the host (`.cpu()`, `.numpy()`, `.tolist()`, `.to("cpu")`) or
    handed to numpy in the code forward reaches: the work then runs on the CPU."""
    for _, fn in ctx.code:
        static: set[str] | None = None
        for call in ctx.calls(fn):
            hit = _host_call(ctx, call.node, call.callee, call.ref)
            if hit is None:
                continue
            subject = call.node.child_by_field_name("function")
            if subject is not None and subject.type == "attribute" and hit != "numpy":
                subject = subject.child_by_field_name("object")
            else:
                subject = call.args
            if static is None:
                static = (
                    parameter_only_locals(fn) | {"self", "cls"} | set(ctx.resolver.module_aliases())
                )
            if subject is None or not _mentions_values(subject, static):
                continue
            ctx.add(
                call.node,
                Severity.error,
                "cpu-compute",
                f"`{text(call.node)[:50]}` "
                + (
                    "hands tensor data to numpy"
                    if hit == "numpy"
                    else "moves tensor data to the host"
                )
                + ": the work then runs on the CPU, not in a CUDA kernel",
            )


def _host_call(ctx: CandidateContext, node: Node, callee: str, ref: Ref | None) -> str | None:
    dotted = ref.dotted if ref is not None and ref.dotted else callee
    if dotted.startswith("numpy.") or dotted in ("torch.from_numpy",):
        return "numpy"
    fn = node.child_by_field_name("function")
    if fn is None or fn.type != "attribute":
        return None
    method = text(fn.child_by_field_name("attribute"))
    if method in _HOST_METHODS:
        return method
    if method == "to":
        args = node.child_by_field_name("arguments")
        for arg in args.named_children if args is not None else []:
            value = arg.child_by_field_name("value") if arg.type == "keyword_argument" else arg
            if value is None:
                continue
            s = ctx.resolver.string(value)
            if s == "cpu" or re.fullmatch(r"(torch\.)?device\(\s*['\"]cpu['\"]\s*\)", text(value)):
                return "to"
    return None


def _mentions_values(node: Node, static: set[str]) -> bool:
    """Whether an expression reads tensor values that are not module parameters (sizes and
    dtypes do not count)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type == "identifier":
            if text(n) in static:
                continue
            parent = n.parent
            if (
                parent is not None
                and parent.type == "attribute"
                and parent.child_by_field_name("object") == n
                and text(parent.child_by_field_name("attribute")) in _SIZE_ATTRS
            ):
                continue
            return True
        if n.type == "attribute":
            attr = text(n.child_by_field_name("attribute"))
            if attr in _SIZE_ATTRS:
                continue
            obj = n.child_by_field_name("object")
            if obj is not None:
                stack.append(obj)
            continue
        if n.type == "keyword_argument":
            value = n.child_by_field_name("value")
            if value is not None:
                stack.append(value)
            continue
        stack.extend(n.named_children)
    return False
