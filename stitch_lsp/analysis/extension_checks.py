"""Checks on the CUDA/C++ a candidate builds: kernels that cannot compute the answer, launches
the compiler never sees, and wrappers that cheat around their kernels.

They need the Python side to know which wrapper arguments are forward's inputs (zeroing an
input is an exploit, zeroing an output buffer before an atomic reduction is not), so they run
on candidate files only.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass

from tree_sitter import Node

from stitch_lsp.analysis.cuda_facts import CudaFacts, RawFunction
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.analysis.embedded import EmbeddedCuda
from stitch_lsp.analysis.python_checks import CandidateContext, TorchHit
from stitch_lsp.analysis.python_facts import param_names
from stitch_lsp.analysis.syntax import text
from stitch_lsp.analysis.torch_ops import HEAVY_OPS, is_handle_use, vendor_families
from stitch_lsp.models.findings import Severity

# Python-side wrappers around a tensor that keep its storage (or pass its address on).
_PASS_THROUGH = frozenset(
    {"contiguous", "view", "reshape", "flatten", "detach", "data_ptr", "view_as", "squeeze",
     "unsqueeze", "c_void_p", "c_voidp", "int"}
)  # fmt: skip
# An associative container keyed on an address: a cache of results per input buffer.
_POINTER_KEY = re.compile(
    r"(map|set)\s*<\s*(const\s+)?(\w+::)*\w+\s*\*|(map|set)\s*<\s*(std::)?u?intptr_t"
)
_SIXTEEN_BIT = ("half", "bfloat16", "Half", "BFloat16")


@dataclass(slots=True)
class Source:
    emb: EmbeddedCuda
    facts: CudaFacts
    flags: set[str] | None  # -D macros of the build; None when they cannot be read
    index: int = -1  # set while the findings are computed, see `range`

    def range(self, span: tuple[int, int]) -> Range:
        """Where a span of this CUDA string is in the document. While findings are computed
        (`index` >= 0) it is kept as (index, start, end, -1) and placed afterwards, so the
        findings of unchanged CUDA can be reused when the Python around it moves."""
        if self.index >= 0:
            return (self.index, span[0], span[1], -1)
        return self.emb.virtual_bytes_to_document(span[0], span[1])


@dataclass(slots=True)
class _Sink:
    """What the extension checks read from and write to the candidate context."""

    reference_fp32: bool
    dtype_assumed: bool
    diags: list[Diag]
    torch_hits: list[TorchHit]


_CACHE: OrderedDict[tuple, tuple[list[Diag], list[TorchHit]]] = OrderedDict()
_CACHE_SIZE = 64
_LOCK = threading.Lock()


def check_extension(ctx: CandidateContext, sources: list[Source]) -> None:
    """Findings of the file's CUDA; cached by the CUDA texts and what Python tells about them."""
    if not sources:
        return
    inputs = _wrapper_inputs(ctx)
    key = (
        tuple(s.emb.data for s in sources),
        tuple(frozenset(s.flags) if s.flags is not None else None for s in sources),
        tuple(sorted((k, tuple(sorted(v))) for k, v in inputs.items())),
        ctx.reference_fp32,
        ctx.dtype_assumed,
    )
    with _LOCK:
        found = _CACHE.get(key)
        if found is not None:
            _CACHE.move_to_end(key)
    if found is None:
        virtual = [Source(s.emb, s.facts, s.flags, i) for i, s in enumerate(sources)]
        sink = _Sink(ctx.reference_fp32, ctx.dtype_assumed, [], [])
        _extension_findings(sink, virtual, inputs)  # type: ignore[arg-type]
        found = (sink.diags, sink.torch_hits)
        with _LOCK:
            _CACHE[key] = found
            while len(_CACHE) > _CACHE_SIZE:
                _CACHE.popitem(last=False)
    diags, hits = found
    for d in diags:
        ctx.diags.append(Diag(_place(sources, d.range), d.severity, d.rule_id, d.message))
    for h in hits:
        ctx.torch_hits.append(
            TorchHit(_place(sources, h.range), h.weight, h.shown, h.canonical, h.how)
        )


def _place(sources: list[Source], tagged: Range) -> Range:
    index, start, end, _ = tagged
    return sources[index].range((start, end))


def _extension_findings(
    ctx: CandidateContext, sources: list[Source], inputs: dict[str, set[int]]
) -> None:
    kernels: dict[str, tuple[Source, RawFunction]] = {}
    for src in sources:
        for fn in src.facts.functions:
            if fn.kind == "kernel":
                kernels.setdefault(fn.name, (src, fn))
    launched: set[str] = set()
    for src in sources:
        launched |= src.facts.launched_names(src.flags)
        for launch in src.facts.launches:
            why = src.facts.dead(launch.span, src.flags) if src.facts.branches else None
            if why is not None:
                ctx.diags.append(
                    Diag(
                        src.range(launch.name_span),
                        Severity.warning,
                        "kernel-unused",
                        f"this launch of `{launch.kernel}` sits under {why}: it is never "
                        "compiled or never runs, so the kernel does no work",
                    )
                )
    _kernel_checks(ctx, kernels, launched)
    for src in sources:
        for fn in src.facts.functions:
            if fn.host is not None:
                _wrapper_checks(ctx, src, fn, inputs.get(fn.name, set()), kernels)
        _globals_cache(ctx, src)
        _call_counters(ctx, src)
        _stored_results(ctx, src)
        _impossible_launches(ctx, src)
        _flushed_outputs(ctx, src)
        for span, name in src.facts.py_patches:
            what = f"`{name}`" if name else "an attribute"
            ctx.diags.append(
                Diag(
                    src.range(span),
                    Severity.error,
                    "harness-patch",
                    f"the C++ side sets {what} on a Python module it imports: replacing "
                    "PyTorch's or the harness's functions (`torch.isclose`, `torch.allclose`) "
                    "can make a wrong result compare equal",
                )
            )
        for called, span in src.facts.library_calls:
            families = vendor_families(called)
            if families:
                # The family list travels in `canonical`: `cudnnConvolutionForward` is any
                # forward convolution, whatever its dimensions.
                canonical = "|".join(sorted(families))
                ctx.torch_hits.append(
                    TorchHit(src.range(span), "heavy", called, canonical, "vendor")
                )
        for start, end, op, shown in src.facts.aten:
            ctx.torch_hits.append(
                TorchHit(
                    src.range((start, end)),
                    "heavy" if op in HEAVY_OPS else "light",
                    shown,
                    shown if "::" in shown else f"at::{op}",  # `relu` under `using namespace at`
                    "aten",
                )
            )
    if ctx.reference_fp32:
        _precision(ctx, sources)


def _kernel_checks(
    ctx: CandidateContext,
    kernels: dict[str, tuple[Source, RawFunction]],
    launched: set[str],
) -> None:
    used = [(src, fn) for name, (src, fn) in kernels.items() if name in launched and fn.use]
    for src, fn in used:
        if fn.use is not None and fn.use.empty:
            ctx.diags.append(
                Diag(
                    src.range(fn.name_span),
                    Severity.warning,
                    "constant-output",
                    f"kernel `{fn.name}` has an empty body: launching it does no work",
                )
            )
    working = [(s, f) for s, f in used if f.use is not None and not f.use.empty and f.use.pointers]
    if not working:
        return
    if not any(f.use.reads_pointers for _, f in working if f.use is not None):
        for src, fn in working:
            ctx.diags.append(
                Diag(
                    src.range(fn.name_span),
                    Severity.warning,
                    "constant-output",
                    f"kernel `{fn.name}` never reads its pointer parameters, and no other kernel "
                    "reads any: what it writes cannot depend on the inputs",
                )
            )
        return
    stores = [f.use for _, f in working if f.use is not None and f.use.stores]
    if stores and all(u.constant_stores == u.stores for u in stores):
        for src, fn in working:
            if fn.use is not None and fn.use.stores:
                ctx.diags.append(
                    Diag(
                        src.range(fn.name_span),
                        Severity.warning,
                        "constant-output",
                        f"kernel `{fn.name}` only ever stores constants (`0`, `0.f * x`): the "
                        "output does not depend on the inputs",
                    )
                )


def _py_root(node: Node | None) -> str | None:
    """`x`, `x.contiguous()`, `ctypes.c_void_p(x.data_ptr())` -> `x`."""
    for _ in range(12):
        if node is None:
            return None
        if node.type == "identifier":
            return text(node)
        if node.type == "parenthesized_expression" and node.named_children:
            node = node.named_children[0]
        elif node.type == "call":
            fn = node.child_by_field_name("function")
            args = node.child_by_field_name("arguments")
            last = text(fn).rsplit(".", 1)[-1] if fn is not None else ""
            if last not in _PASS_THROUGH:
                return None
            if fn is not None and fn.type == "attribute" and last not in ("c_void_p", "c_voidp"):
                node = fn.child_by_field_name("object")
            elif args is not None and args.named_children:
                node = args.named_children[0]
            else:
                return None
        else:
            return None
    return None


def _forward_inputs(fwd: Node) -> set[str]:
    """forward's tensor parameters and the names that stay views of them."""
    names = {p for p in param_names(fwd) if p not in ("self",) and not p.startswith("*")}
    body = fwd.child_by_field_name("body")
    stack = [body] if body is not None else []
    assigns = []
    while stack:
        n = stack.pop()
        if n.type in ("function_definition", "lambda", "class_definition"):
            continue
        if n.type == "assignment":
            assigns.append(n)
        stack.extend(n.named_children)
    for a in sorted(assigns, key=lambda n: n.start_byte):
        left, right = a.child_by_field_name("left"), a.child_by_field_name("right")
        if left is None or left.type != "identifier":
            continue
        root = _py_root(right)
        if root is not None and root in names:
            names.add(text(left))
        else:
            names.discard(text(left))
    return names


def _wrapper_inputs(ctx: CandidateContext) -> dict[str, set[int]]:
    """For each extension function forward calls: the argument positions given its inputs."""
    out: dict[str, set[int]] = {}
    for cls in ctx.candidates:
        fwd = cls.methods.get("forward")
        if fwd is None:
            continue
        inputs = _forward_inputs(fwd)
        for call in ctx.calls(fwd):
            if not is_handle_use(call.callee, ctx.extension_handles):
                continue
            name = re.sub(r"\(.*?\)", "", call.callee).rsplit(".", 1)[-1]
            positions = out.setdefault(name, set())
            i = 0
            for arg in call.args.named_children:
                if arg.type in ("keyword_argument", "comment", "list_splat", "dictionary_splat"):
                    continue
                if _py_root(arg) in inputs:
                    positions.add(i)
                i += 1
    return out


def _wrapper_checks(
    ctx: CandidateContext,
    src: Source,
    fn: RawFunction,
    input_positions: set[int],
    kernels: dict[str, tuple[Source, RawFunction]],
) -> None:
    host = fn.host
    assert host is not None
    inputs = {host.params[i] for i in input_positions if i < len(host.params)}

    def add(span: tuple[int, int], sev: Severity, rule: str, msg: str) -> None:
        ctx.diags.append(Diag(src.range(span), sev, rule, msg))

    def handed(name: str) -> bool:
        """Whether `name` or a view of it went to some call (a kernel may have written it)."""
        return "*" in host.passed or any(host.origin(p) == name for p in host.passed)

    def written(name: str) -> bool:
        """Whether something may write `name` (or a view of it): a kernel that stores through
        that argument, a call that is not known to only read, or an in-place method."""
        if "*" in host.passed:
            return True
        if any(host.origin(m) == name for m, _, _ in host.mutations):
            return True
        for li in fn.launches:
            launch = src.facts.launches[li]
            target = kernels.get(launch.kernel)
            for j, root in enumerate(launch.arg_roots):
                if host.origin(root) != name:
                    continue
                if target is None or target[1].use is None or target[1].use.written(j):
                    return True
        for callee, roots in host.calls:
            for j, root in enumerate(roots):
                if host.origin(root) == name and not _reads_only(callee, j):
                    return True
        return False

    for span, root, ctor in host.returns:
        if ctor is not None:
            add(span, Severity.error, "constant-output",
                f"`{fn.name}` returns a fresh `{ctor}(...)` that no kernel writes: the output "
                "ignores the inputs")  # fmt: skip
            continue
        origin = host.origin(root)
        if origin is None:
            continue
        if origin in host.allocs and not handed(origin):
            ctor_name = host.allocs[origin][0]
            add(span, Severity.error, "constant-output",
                f"`{fn.name}` returns `{root}`, made by `{ctor_name}(...)` and never handed to a "
                "kernel: the output ignores the inputs")  # fmt: skip
        elif (
            origin in host.params
            and (origin in host.tensor_params or inputs)
            and not written(origin)
        ):
            add(span, Severity.warning, "noop-forward",
                f"`{fn.name}` returns its input `{root}` unchanged: the wrapper computes "
                "nothing")  # fmt: skip
    for name, how, span in host.mutations:
        if host.origin(name) in inputs:
            add(span, Severity.warning, "input-mutation",
                f"`{name}.{how}` writes into `{host.origin(name)}`, an input of forward: the "
                "reference and later trials would see changed inputs"
                if not how.endswith("(...)") else
                f"`{how.replace('(...)', '')}` writes into `{host.origin(name)}`, an input of "
                "forward: the reference and later trials would see changed inputs")  # fmt: skip
    for li in fn.launches:
        launch = src.facts.launches[li]
        target = kernels.get(launch.kernel)
        if target is None or target[1].use is None:
            continue
        for j, root in enumerate(launch.arg_roots):
            origin = host.origin(root)
            if origin in inputs and target[1].use.written(j):
                add(launch.name_span, Severity.warning, "input-mutation",
                    f"kernel `{launch.kernel}` writes into `{origin}` (argument {j + 1}), an "
                    "input of forward: the reference and later trials would see changed "
                    "inputs")  # fmt: skip
    for span, returns in host.catches:
        inside = [a for a in src.facts.aten if span[0] <= a[0] < span[1]]
        if inside:
            add(span, Severity.error, "torch-fallback",
                f"catch falls back to PyTorch (`{inside[0][3]}`): a failing kernel would still "
                "produce the right answer")  # fmt: skip
        elif returns:
            add(span, Severity.warning, "torch-fallback",
                "catch returns a result when the kernel fails: a broken kernel would still "
                "produce an output")  # fmt: skip
    statics = {name: (type_text, span) for name, type_text, span in host.statics}
    for name, (type_text, span) in statics.items():
        if "Tensor" in type_text or _POINTER_KEY.search(type_text):
            add(span, Severity.error, "input-cache",
                f"`{type_text} {name}` keeps results between calls: a repeated input "
                "returns the stored output and skips the work")  # fmt: skip
    for sides, span in host.compares:
        cached = sides & set(statics)
        if cached and any(host.origin(s) in host.params for s in sides - cached):
            add(span, Severity.error, "input-cache",
                f"compares the static `{sorted(cached)[0]}` with an input: results keyed on "
                "which buffer came in skip the work on repeated inputs")  # fmt: skip
    for span, what in host.cpu:
        add(span, Severity.error, "cpu-compute",
            f"`{what}` in `{fn.name}` works on CPU memory: host code computing the result is not "
            "a CUDA implementation")  # fmt: skip


_READ_ONLY_CALLS = re.compile(
    r"^(TORCH_CHECK\w*|TORCH_INTERNAL_ASSERT\w*|AT_ASSERT\w*|C10_\w+|std::\w+|min|max"
    r"|(?:torch|at)::(?!\w*_out$)\w*[^_]|static_cast<.*|reinterpret_cast<.*|sizeof)$"
)


def _reads_only(callee: str, position: int) -> bool:
    """Whether a call only reads its argument at `position`: ATen's functional operators,
    checks, casts; the copy/memset family writes its first argument only."""
    name = callee.rsplit("::", 1)[-1]
    if re.match(r"^(cudaMemcpy|cudaMemset|cuMemcpy|cuMemset|memcpy|memset)\w*$", name):
        return position > 0
    return bool(_READ_ONLY_CALLS.match(callee))


def _globals_cache(ctx: CandidateContext, src: Source) -> None:
    """A file-scope tensor or pointer compared with an input's address: a cache."""
    persistent = {name: (type_text, span) for name, type_text, span in src.facts.globals}
    if not persistent:
        return
    for fn in src.facts.functions:
        host = fn.host
        if host is None:
            continue
        for name, (type_text, span) in persistent.items():
            if ("Tensor" in type_text or _POINTER_KEY.search(type_text)) and (
                name in host.passed or any(name in s for s, _ in host.compares)
            ):
                ctx.diags.append(
                    Diag(
                        src.range(span),
                        Severity.error,
                        "input-cache",
                        f"`{type_text} {name}` at file scope keeps results between calls: a "
                        "repeated input returns the stored output and skips the work",
                    )
                )
                persistent.pop(name)
                break
        for sides, span in host.compares:
            cached = sides & set(persistent)
            if cached and any(host.origin(s) in host.params for s in sides - cached):
                ctx.diags.append(
                    Diag(
                        src.range(span),
                        Severity.error,
                        "input-cache",
                        f"compares `{sorted(cached)[0]}`, kept at file scope, with an input: "
                        "results keyed on which buffer came in skip the work on repeated inputs",
                    )
                )


_COUNTER_TYPE = re.compile(
    r"^(static\s+|thread_local\s+|volatile\s+|inline\s+)*(unsigned\s+|signed\s+)?"
    r"(int|long|long\s+long|short|size_t|std::size_t|u?int(8|16|32|64)_t|std::atomic\s*<[^>]*>"
    r"|std::atomic_\w+)$"
)
_CONDITION = re.compile(rb"\b(?:if|while)\s*\(")


def _call_counters(ctx: CandidateContext, src: Source) -> None:
    """A `static` (or file-scope) integer that a host function increments and branches on: the
    launcher does other work after some number of calls than when it was checked."""
    data = src.emb.data
    file_scope = {n for n, t, _ in src.facts.globals if _COUNTER_TYPE.match(t.strip())}
    for fn in src.facts.functions:
        host = fn.host
        if host is None:
            continue
        names = file_scope | {n for n, t, _ in host.statics if _COUNTER_TYPE.match(t.strip())}
        if not names:
            continue
        start, end = fn.body_span
        body = data[start:end]
        for name in sorted(names):
            word = re.escape(name.encode())
            bumped = re.search(rb"\+\+\s*" + word + rb"\b|\b" + word + rb"\s*(\+\+|[+-]=)", body)
            if bumped is None:
                continue
            for m in _CONDITION.finditer(body):
                close = _matching_paren(body, m.end() - 1)
                cond = body[m.end() : close]
                if re.search(rb"\b" + word + rb"\b", cond):
                    ctx.diags.append(
                        Diag(
                            src.range((start + m.start(), start + close + 1)),
                            Severity.warning,
                            "call-count",
                            f"`{fn.name}` counts its calls in `{name}` and branches on the "
                            "count: it does other work after some number of calls than when "
                            "its results were checked",
                        )
                    )
                    break


_GUARDED_COPY = re.compile(
    rb"\bif\s*\(([^;{]*)\)\s*(?:\{\s*)?(?:return\s*)?[^;]*?\b(?:cudaMemcpy\w*|cuMemcpy\w*)"
    rb"\s*\(\s*(\w+)\s*,\s*(\w+)"
)


def _stored_results(ctx: CandidateContext, src: Source) -> None:
    """`if (kept && key == seen) return cudaMemcpy(out, kept, ...)`: an output copied, under a
    condition on state kept between calls, from a buffer kept between calls. However the key is
    made (a hash of the input's address), that is a stored result returned."""
    data = src.emb.data
    file_scope = {n for n, _, _ in src.facts.globals}
    for fn in src.facts.functions:
        host = fn.host
        if host is None:
            continue
        kept = file_scope | {n for n, _, _ in host.statics}
        if not kept:
            continue
        start, end = fn.body_span
        for m in _GUARDED_COPY.finditer(data[start:end]):
            cond = set(re.findall(rb"[A-Za-z_]\w*", m.group(1)))
            dst, source = m.group(2).decode(), m.group(3).decode()
            if dst in host.params and source in kept and {k.encode() for k in kept} & cond:
                ctx.diags.append(
                    Diag(
                        src.range((start + m.start(), start + m.end())),
                        Severity.error,
                        "input-cache",
                        f"`{fn.name}` copies `{source}`, a buffer kept between calls, into its "
                        f"output `{dst}` when state kept between calls says so: a stored result "
                        "returned instead of computed",
                    )
                )


_NEGATIVE_TEST = re.compile(rb"\bif\s*\(\s*([A-Za-z_]\w*)\s*(?:<\s*0|<=\s*-\s*1|==\s*-\s*1)\s*\)")


def _impossible_launches(ctx: CandidateContext, src: Source) -> None:
    """A launch that runs only when a size is negative: `n` sizes the grid, so it never is."""
    data = src.emb.data
    for fn in src.facts.functions:
        host = fn.host
        if host is None or not fn.launches:
            continue
        start, end = fn.body_span
        body = data[start:end]
        for m in _NEGATIVE_TEST.finditer(body):
            name = m.group(1).decode()
            if name not in host.params:
                continue
            after = m.end()
            while after < len(body) and body[after : after + 1].isspace():
                after += 1
            if body[after : after + 1] == b"{":
                stop = _matching_brace(body, after)
            else:
                stop = body.find(b";", after)
            for li in fn.launches:
                launch = src.facts.launches[li]
                at = launch.span[0] - start
                if after <= at <= stop and any(name in c for c in launch.config):
                    ctx.diags.append(
                        Diag(
                            src.range(launch.name_span),
                            Severity.warning,
                            "kernel-unused",
                            f"this launch of `{launch.kernel}` runs only when `{name}` is "
                            f"negative, and `{name}` sizes its grid: it never runs, so the "
                            "kernel does no work",
                        )
                    )


_NUMBER = rb"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)[fF]?"
_ZERO = rb"0(?:\.0*)?[fF]?"
_FLUSH = re.compile(
    rb"(?:fabsf?\s*\(\s*)?\b([A-Za-z_]\w*)\s*\)?\s*<=?\s*"
    + _NUMBER
    + rb"\s*\)?\s*\?\s*"
    + _ZERO
    + rb"\s*:\s*\1\b"
    + rb"|(?:fabsf?\s*\(\s*)?\b([A-Za-z_]\w*)\s*\)?\s*>=?\s*"
    + _NUMBER
    + rb"\s*\)?\s*\?\s*\3\s*:\s*"
    + _ZERO
    + rb"(?![.\w])"
)


def _flushed_outputs(ctx: CandidateContext, src: Source) -> None:
    """`v < 1e-4f ? 0.f : v` in a kernel: values under a tolerance-sized threshold (1e-8 to
    1e-2) written as zeros. Where every true output is that small (a softmax over wide rows),
    the zeros pass allclose without anything being computed. ReLU's threshold is 0, shrink
    operators' are larger, a denormal flush's far smaller: none of those is flagged."""
    data = src.emb.data
    for fn in src.facts.functions:
        if fn.kind != "kernel":
            continue
        start, end = fn.body_span
        for m in _FLUSH.finditer(data[start:end]):
            threshold = float(m.group(2) or m.group(4))
            if 1e-8 <= threshold <= 1e-2:
                ctx.diags.append(
                    Diag(
                        src.range((start + m.start(), start + m.end())),
                        Severity.warning,
                        "constant-output",
                        f"kernel `{fn.name}` writes values below {threshold:g} as zero: where "
                        "the true outputs are that small, zeros pass the tolerance without "
                        "being computed",
                    )
                )
                break


def _matching_brace(data: bytes, open_at: int) -> int:
    depth = 0
    for i in range(open_at, len(data)):
        c = data[i : i + 1]
        if c == b"{":
            depth += 1
        elif c == b"}":
            depth -= 1
            if depth == 0:
                return i
    return len(data)


def _matching_paren(data: bytes, open_at: int) -> int:
    depth = 0
    for i in range(open_at, min(len(data), open_at + 2000)):
        c = data[i : i + 1]
        if c == b"(":
            depth += 1
        elif c == b")":
            depth -= 1
            if depth == 0:
                return i
    return open_at


def _native_sixteen_bit(sources: list[Source]) -> bool:
    """Kernels that take 16-bit inputs: the data arrive in fp16/bf16, so the problem is."""
    for src in sources:
        for fn in src.facts.functions:
            if fn.use is not None and any(p.sixteen_bit and p.const for p in fn.use.pointers):
                return True
    return False


def _precision(ctx: CandidateContext, sources: list[Source]) -> None:
    """TF32 and fp16/bf16 conversions inside the kernels of an fp32 problem."""
    for src in sources:
        for span, token in src.facts.tf32:
            ctx.diags.append(
                Diag(
                    src.range(span),
                    Severity.warning,
                    "downcast",
                    f"`{token}` computes fp32 products in TF32 or 16-bit (10-bit mantissa or "
                    "less): the reference is full fp32, so this is a less precise computation",
                )
            )
    if ctx.dtype_assumed and _native_sixteen_bit(sources):
        return  # nothing says fp32, and the kernels read 16-bit data as it comes
    for src in sources:
        if src.facts.half_conversions:
            ctx.diags.append(
                Diag(
                    src.range(src.facts.half_conversions[0]),
                    Severity.warning,
                    "downcast",
                    "the kernel converts fp32 values to 16-bit: the reference is fp32, so this "
                    "computes something less precise",
                )
            )
