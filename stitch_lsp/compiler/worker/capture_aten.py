"""The ATen path: capture where symbolic fx tracing cannot (einops, data-shaped Python, modules
whose forward branches on tensor properties such as nn.MultiheadAttention).

The model's forward runs for real under `make_fx` on fake tensors backed by the meta device (no
real memory, however large the problem), with parameters, buffers and plain tensor attributes
passed in by name, so every placeholder maps back to `self.<path>`. Composite ops arrive
decomposed (einsum into permutes and bmm, scaled_dot_product_attention into its math form);
each ATen overload maps onto the same IR builder as the fx path, through the same op catalog.
Stack traces keep the reference's line numbers for refusals.
"""

from __future__ import annotations

import operator
from typing import Any, Literal

import torch
import torch.fx
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.func import functional_call
from torch.fx.experimental.proxy_tensor import make_fx

from stitch_lsp.compiler.attr_path import display_path
from stitch_lsp.compiler.builder import MinMax, select_op
from stitch_lsp.compiler.catalog import EwOp
from stitch_lsp.compiler.ir import Const, Graph, Leaf, Node, Shape, Unsupported, Use
from stitch_lsp.compiler.worker.capture_attention import attention_as_one_op
from stitch_lsp.compiler.worker.capture_leaves import (
    LEAF_OP,
    LeafCall,
    LeafRecord,
    leaves_as_ops,
    plain_attributes,
    run_leaf,
)
from stitch_lsp.compiler.worker.constant_masks import fold_constant_masks
from stitch_lsp.compiler.worker.converter import (
    Converter,
    Missing,
    draws_random,
    shape_or_none,
    traceback_frames,
    where_suffix,
)
from stitch_lsp.compiler.worker.fallback import (
    DTYPES,
    IN_PLACE,
    KERNEL_READABLE,
    NotPlain,
    out_of_place,
    python_literal,
    refusal,
    result_dtypes,
    returns_alias,
    spelled_call,
)
from stitch_lsp.compiler.worker.lowering import for_aten
from stitch_lsp.compiler.worker.opaque_modules import (
    DATA_DEPENDENT,
    DataDependent,
    NotOpaque,
    marked,
    module_at_fault,
)
from stitch_lsp.compiler.worker.spelling import leaf_rule, tables
from stitch_lsp.compiler.worker.trace_patches import KnownValues, library_idioms_traceable

_aten = torch.ops.aten


def trace(
    model: nn.Module, inputs: list[Any], functional: bool = False
) -> tuple[torch.fx.GraphModule, list[str], set[str], list[LeafRecord]]:
    """(graph, placeholder names of the state, names of plain attributes, leaf-module calls).
    `functional`: writes through views become out-of-place ops and scatters into their base
    (torch.func.functionalize), for a forward whose in-place writes the plain trace refuses."""
    params = dict(model.named_parameters())
    buffers = dict(model.named_buffers())
    plain = plain_attributes(model)
    state = {**params, **buffers, **plain}
    names = list(state)

    def forward(flat: list[torch.Tensor], *args: Any) -> Any:
        with KnownValues():
            return functional_call(model, dict(zip(names, flat, strict=True)), args, strict=False)

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    with mode:
        flat = [mode.from_tensor(t) for t in state.values()]
        fake_inputs = [mode.from_tensor(t) if isinstance(t, torch.Tensor) else t for t in inputs]
    with (
        leaves_as_ops(model) as records,
        attention_as_one_op(),
        library_idioms_traceable(),
    ):
        traced = torch.func.functionalize(forward) if functional else forward
        gm = make_fx(traced, tracing_mode="fake", record_stack_traces=True)(flat, *fake_inputs)
        kept = list(records)
    return gm, names, set(plain), kept


def _name(target: Any) -> str:
    packet = getattr(target, "overloadpacket", None)
    return packet.__name__ if packet is not None else getattr(target, "__name__", str(target))


class AtenConverter(Converter):
    def __init__(
        self,
        gm: torch.fx.GraphModule,
        state_names: list[str],
        plain: set[str],
        records: list[LeafRecord],
        model: nn.Module,
        inputs: list[Any],
        input_names: list[str],
        path: str | None,
    ) -> None:
        super().__init__(gm, path)
        self.state_names = state_names
        self.plain = plain
        self.records = records
        self.model = model
        self.inputs = inputs
        self.input_names = input_names
        self.attr_values: dict[str, Any] = {}
        self._before = 0
        _, _, _, self.overloads = tables()
        self._unread_draws = _unread_trailing_draws(gm)

    def what(self, node: torch.fx.Node) -> str:
        if node.op != "call_function":
            return str(node.target)
        if node.target is LEAF_OP:
            rec = self.records[int(node.args[0])]  # type: ignore[arg-type]
            return display_path(rec.path)
        return "torch." + _name(node.target)

    def spelled(self, n: torch.fx.Node) -> str:
        return _name(n.target)

    def out_shape(self, n: torch.fx.Node) -> Shape | None:
        return shape_or_none(n)

    def constant(self, n: torch.fx.Node) -> Use:
        """A tensor made inside forward from Python numbers (the trace keeps their values, see
        `_scalars_keep_their_value`): a number becomes a filled scalar, an index list or a small
        table a tensor PyTorch makes from the values spelled in the program; larger ones are
        refused."""
        t = getattr(self.gm, str(n.target), None)
        if not isinstance(t, torch.Tensor) or t.device.type == "meta":
            raise Unsupported(
                f"{self.desc(n)}: a constant tensor made inside forward is not supported"
            )
        if t.dim() == 0 and t.dtype in (torch.float32, torch.float64, torch.int64, torch.int32):
            return self.b.fill(float(t.item()), ())
        if t.numel() > MAX_CONSTANT or t.dtype not in DTYPES:
            raise Unsupported(
                f"{self.desc(n)}: a constant tensor of {t.numel()} {t.dtype} values made inside "
                f"forward (at most {MAX_CONSTANT} are kept in the generated file)"
            )
        # An index list (`x[..., [-2], :]`) or a small table: PyTorch makes it, with its values.
        dtype = DTYPES[t.dtype]
        call = f"torch.tensor({python_literal(t.tolist())}, dtype=torch.{dtype}, device=dev)"
        return self.b.add(
            "aten", "tensor", [], tuple(t.shape), call=call.replace("{", "{{").replace("}", "}}"),
            dtype=dtype, why="a constant made inside forward", site=self.desc(n),
        )  # fmt: skip

    # -- dispatch --------------------------------------------------------------------------------
    def convert(self, n: torch.fx.Node) -> Any:
        """The node lowered onto the builder, or, where that fails, run as its ATen call."""
        if _dead(n):  # `detach(mean)` of a norm's unused statistics (bf16 GroupNorm)
            return Missing(self.desc(n))
        if n in self._unread_draws:  # Wav2Vec2's LayerDrop in eval mode
            return Missing(self.desc(n))
        if not _may_fall_back(n):
            return self.lower(n)
        unreadable = self._unreadable_operand(n)
        if unreadable is not None:
            return self.fallback(n, Unsupported(f"{self.desc(n)}: {unreadable}"))
        self._before = self.g._next  # ids above this are the lowering's own nodes
        try:
            out = self.lower(n)
        except Unsupported as exc:
            return self.fallback(n, exc)
        mismatch = self._dtype_mismatch(n, out)
        if mismatch is not None:
            return self.fallback(n, Unsupported(f"{self.desc(n)}: {mismatch}"))
        return out

    def lower(self, n: torch.fx.Node) -> Any:
        if n.op == "placeholder":
            return self.placeholder(n)
        if n.op == "get_attr":
            return self.constant(n)
        if n.op != "call_function":
            raise Unsupported(f"unexpected graph node {n.op}")
        f = n.target
        if f is operator.getitem:
            base = self.val(n.args[0])
            idx = n.args[1]
            if isinstance(base, MinMax):
                return base.values if idx == 0 else self.b.indices(base)
            item = base[idx]
            return Missing(self.desc(n)) if item is None else item
        if f is LEAF_OP:
            return self.leaf(n)
        if f in self.overloads:
            return self.ew(n, self.overloads[f])
        lowering = for_aten(_name(f))
        if lowering is None:
            raise Unsupported(f"{self.desc(n)} is not supported by the builtin coder")
        return lowering(self, n)

    # -- fallbacks -------------------------------------------------------------------------------
    def fallback(self, n: torch.fx.Node, exc: Unsupported) -> Any:
        """`n` as an `aten` node that runs its traced call, or `exc` where it may not. An
        in-place op runs as its out-of-place twin on a value of the program's own, or as
        itself on a buffer (a static KV cache's update: model state, kept like running stats)."""
        why = refusal(n)
        target = n.target
        if why == IN_PLACE:
            if self._buffer_written(n) is not None:
                return self._buffer_update(n, exc)
            made = self._fresh_fallback_written(n)
            if made is None and self._clone_in_pytorch(n):
                made = self._fresh_fallback_written(n)
            if made is not None:
                return self._fallback_update(n, made, exc)
            twin = out_of_place(n.target)
            try:
                self.check_inplace(n)
            except Unsupported as view_exc:
                why = str(view_exc)
            else:
                if twin is not None:
                    why, target = None, twin
        results = result_dtypes(n)
        if why is None and results is None:
            why = "its result is not a plain tensor"
        call = None
        if why is None:
            try:
                call = spelled_call(n, self._fallback_value, target)
            except (NotPlain, Unsupported) as bad:
                why = f"an argument ({bad}) has no source spelling"
        if why is not None or call is None or results is None:
            raise Unsupported(f"{exc} (and it cannot run as a PyTorch fallback: {why})") from exc
        fn = f"{_name(target)}.{getattr(target, '_overloadname', 'default')}"
        # Why it falls back and where the library runs it: the plan, header and hover say so.
        said = {"why": _reason(str(exc), self.desc(n), self.label(n)), "site": self.desc(n)}
        copy = returns_alias(target)
        operands: list[Use | Const] = list(call.operands)
        if not isinstance(n.meta.get("val"), (list, tuple)):
            shape, dtype = results[0]
            return self.b.add(
                "aten", fn, operands, shape, call=call.template, dtype=dtype, copy=copy, **said
            )
        whole = self.b.add("aten", fn, operands, (), call=call.template, dtype="tuple", **said)
        return [
            self.b.add(
                "aten",
                f"{fn}[{k}]",
                [whole],
                shape,
                call=f"{{0}}[{k}]",
                dtype=dtype,
                copy=copy,
                **said,
            )
            for k, (shape, dtype) in enumerate(results)
        ]

    def _clone_in_pytorch(self, n: torch.fx.Node) -> bool:
        """Where `n` writes (a view of) a clone (torchvision Swin V2: `b = qkv_bias.clone()`,
        then `b[k:2 * k].zero_()`), the clone becomes a tensor PyTorch makes, so the write can run
        in place on it, as in the reference; reads after the write see it, reads before do not."""
        chain: list[torch.fx.Node] = []
        node = n.args[0] if n.args else None
        while isinstance(node, torch.fx.Node) and node.op == "call_function":
            if _name(node.target) not in _VIEWS:
                break
            chain.append(node)
            node = node.args[0]
        if not isinstance(node, torch.fx.Node) or node.op != "call_function":
            return False
        if _name(node.target) != "clone":
            return False
        order = {m: i for i, m in enumerate(self.gm.graph.nodes)}
        first = chain[-1] if chain else n
        if any(u is not first and order[u] < order[n] for u in node.users):
            return False  # a view made before the write would not see it
        src, val = self.env.get(node), node.meta.get("val")
        if not isinstance(src, Use) or not isinstance(val, torch.Tensor) or val.dtype not in DTYPES:
            return False
        made = self.g.node(src.vid)
        if made is not None and made.kind == "aten":
            return False  # PyTorch's already
        self.env[node] = self.b.add(
            "aten", "clone.default", [src], tuple(int(d) for d in val.shape), call="{0}.clone()",
            dtype=DTYPES[val.dtype], why="the reference writes into this clone in place",
            site=self.desc(node),
        )  # fmt: skip
        for view in reversed(chain):
            self.env[view] = self.lower(view)
        return True

    def _buffer_written(self, n: torch.fx.Node) -> Leaf | None:
        """The buffer an in-place op writes whole (`self.k_cache.index_copy_(2, pos, k)`)."""
        first = n.args[0] if n.args else None
        v = self.env.get(first) if isinstance(first, torch.fx.Node) else None
        if not isinstance(v, Use) or v.strided or v.trans:
            return None
        leaf = self.g.leaves.get(v.vid)
        if leaf is None or leaf.kind != "buffer" or tuple(v.shape) != tuple(leaf.shape):
            return None
        return leaf

    def _buffer_update(self, n: torch.fx.Node, exc: Unsupported) -> Use:
        """Run the in-place op on the buffer itself, once, where the reference does. Every read
        of the buffer must come after it: a kernel fused earlier could not see the write."""
        leaf = self._buffer_written(n)
        assert leaf is not None
        if any(u.vid == leaf.vid for node in self.g.nodes for u in node.uses):
            why = f"{leaf.expr} is read before it is written"
            raise Unsupported(f"{exc} (and it cannot run as a PyTorch fallback: {why})") from exc
        if not self._index_store(n, leaf):
            self._effect(n, exc, why=f"updates {leaf.expr} in place, as the reference does")
        return Use(leaf.vid, leaf.shape)

    def _index_store(self, n: torch.fx.Node, leaf: Leaf) -> bool:
        """`buffer.index_copy_(dim, index, source)` (a static KV cache's update) as a store of
        the kernel that computes `source`: each element goes straight to its slot in the buffer,
        so the rotated keys are never written anywhere else and no PyTorch call runs."""
        if _name(n.target) != "index_copy_" or len(n.args) != 4 or n.kwargs:
            return False
        _, dim, index, source = n.args
        idx = self.env.get(index) if isinstance(index, torch.fx.Node) else None
        src = self.env.get(source) if isinstance(source, torch.fx.Node) else None
        if not isinstance(dim, int) or not isinstance(idx, Use) or not isinstance(src, Use):
            return False
        rank = len(leaf.shape)
        dim = dim % rank if rank else 0
        if self.b.dtype_of(idx.vid) != "int64" or len(idx.shape) != 1 or idx.strided:
            return False
        want = tuple(idx.shape[0] if i == dim else d for i, d in enumerate(leaf.shape))
        if tuple(src.shape) != want or self.b.dtype_of(src.vid) != leaf.dtype:
            return False
        # the identity reads `source` as the store's kernel sees it (through any view)
        value = self.b.ew("identity", [src], want, dtype=leaf.dtype, stored_by_index=True)
        self.b.add(
            "index_store", "index_copy", [value, idx, Use(leaf.vid, leaf.shape)], (),
            dim=dim, effect=True, dtype="effect",
        )  # fmt: skip
        return True

    def _effect(
        self, n: torch.fx.Node, exc: Unsupported, target: Any = None, args: Any = None, **said: str
    ) -> None:
        """An in-place call run as it is, in order between the kernels: model or program state
        that later reads see (`said`: why, and where for the plan)."""
        target = n.target if target is None else target
        try:
            call = spelled_call(n, self._fallback_value, target, args)
        except (NotPlain, Unsupported) as bad:
            raise Unsupported(f"{exc} (and an argument ({bad}) has no source spelling)") from exc
        fn = f"{_name(target)}.{getattr(target, '_overloadname', 'default')}"
        self.b.add(
            "aten", fn, list(call.operands), (), call=call.template, dtype="effect", effect=True,
            **said,
        )  # fmt: skip

    def _fresh_fallback_written(self, n: torch.fx.Node) -> Use | None:
        """The operand an in-place op writes, where it is (a view of) a tensor a fallback made
        fresh (`attn_mask = x.new_zeros(...)`, then `attn_mask[a:b, c:d] = k`) and no generated
        kernel has read yet: PyTorch may write it in place, as the reference does."""
        first = n.args[0] if n.args else None
        v = self.env.get(first) if isinstance(first, torch.fx.Node) else None
        if not isinstance(v, Use) or v.vid in self.g.leaves:
            return None
        base = self.g.node(v.vid)
        readers = [m for m in self.g.nodes if any(u.vid == v.vid for u in m.uses)]
        if base is None or any(not m.params.get("effect") for m in readers):
            return None
        if base.kind == "ew" and base.fn == "identity" and not base.uses and not readers:
            _materialise_fill(base)  # zeros/full the reference then writes into: made by PyTorch
        if base.kind != "aten" or base.params.get("copy"):
            return None  # a result that may share an operand's memory must not be written
        if base.dtype not in DTYPES.values() or base.params.get("effect"):
            return None
        return v

    def _fallback_update(self, n: torch.fx.Node, written: Use, exc: Unsupported) -> Use:
        """The in-place op as an effect on the fallback's tensor, run where the reference runs
        it; later reads of that tensor come after it in the program."""
        target, args = n.target, None
        value = self._constant_source(n)
        if value is not None:  # `mask[a:b] = k`: fill the view with k, no tensor made for k
            target, args = torch.ops.aten.fill_.Scalar, (n.args[0], value)
        self._effect(
            n, exc, target, args,
            why="writes a tensor made in PyTorch in place, as the reference does",
            site=self.desc(n),
        )  # fmt: skip
        return written

    def _constant_source(self, n: torch.fx.Node) -> float | None:
        """The number a `copy_(view, src)` copies, where src is a constant fill."""
        if _name(n.target) != "copy_" or len(n.args) < 2 or n.kwargs:
            return None
        src = self.env.get(n.args[1]) if isinstance(n.args[1], torch.fx.Node) else None
        node = self.g.node(src.vid) if isinstance(src, Use) else None
        if node is None or node.kind != "ew" or node.fn != "identity" or node.uses:
            return None
        (value,) = node.args
        return float(value.value) if isinstance(value, Const) else None

    def _fallback_value(self, a: torch.fx.Node) -> Any:
        v = self.val(a)
        if isinstance(v, MinMax):
            raise NotPlain("a max/min pair")
        return v

    def _unreadable_operand(self, n: torch.fx.Node) -> str | None:
        """A value a generated kernel cannot read (an int32 or float64 fallback result): every
        op on it runs in PyTorch too."""
        for a in n.all_input_nodes:
            v = self.env.get(a)
            for u in v if isinstance(v, (list, tuple)) else [v]:
                if not isinstance(u, Use):
                    continue
                node = self.g.node(u.vid) if u.vid not in self.g.leaves else None
                if node is not None and node.kind == "aten" and node.dtype not in KERNEL_READABLE:
                    return f"its operand is a {node.dtype} tensor made in PyTorch"
        return None

    def _dtype_mismatch(self, n: torch.fx.Node, out: Any) -> str | None:
        """The lowering computes float32 (bool predicates, int64 indices); a traced result of
        another dtype (float64 math, int32 counts) would be computed wrongly: it falls back."""
        val = n.meta.get("val")
        vals = val if isinstance(val, (list, tuple)) else [val]
        outs = out if isinstance(out, (list, tuple)) else [out]
        for t, u in zip(vals, outs, strict=False):
            if not isinstance(t, torch.Tensor) or not isinstance(u, Use):
                continue
            want = DTYPES.get(t.dtype, str(t.dtype))
            have = self.b.dtype_of(u.vid)
            if want == have or (want, have) in (("float32", "bool"), ("bool", "float32")):
                continue
            made = self.g.node(u.vid) if u.vid > self._before else None
            if want in HALF_DTYPES and have == "float32" and made is not None:
                made.params["dtype"] = want  # computed in float registers, stored as bf16/fp16
                continue
            return f"its {want} result would be computed as {have}"
        return None

    def placeholder(self, n: torch.fx.Node) -> Any:
        i = self.placeholders
        self.placeholders += 1
        value = n.meta.get("val")
        if i < len(self.state_names):
            name = self.state_names[i]
            t = self._state_tensor(name)
            kind: Literal["param", "buffer"] = "param" if isinstance(t, nn.Parameter) else "buffer"
            dtype = str(t.dtype).removeprefix("torch.")
            if dtype in HALF_DTYPES:  # a bf16/fp16 model: kernels load and store its type
                leaf = self.g.add_leaf(kind, display_path(name), tuple(t.shape), dtype, name)
                return Use(leaf.vid, leaf.shape)
            return self.b.leaf(kind, name, tuple(t.shape), dtype)
        k = i - len(self.state_names)
        name = self.input_names[k] if k < len(self.input_names) else f"input{k}"
        if not isinstance(value, torch.Tensor):
            return value
        if value.dtype not in (
            torch.float32,
            torch.int64,
            torch.bfloat16,
            torch.float16,
            torch.bool,
        ):
            raise Unsupported(
                f"input `{name}` is {value.dtype}; the builtin coder handles float32, bfloat16, "
                "float16, int64 and bool inputs"
            )
        self.g.input_names.append(name)
        dtype = str(value.dtype).removeprefix("torch.")
        leaf = self.g.add_leaf("input", name, tuple(value.shape), dtype)
        return Use(leaf.vid, leaf.shape)

    def _state_tensor(self, name: str) -> torch.Tensor:
        obj: Any = self.model
        for part in name.split("."):
            obj = getattr(obj, part)
        return obj

    def leaf(self, n: torch.fx.Node) -> list[Use]:
        rec = self.records[int(n.args[0])]  # type: ignore[arg-type]
        tensors = self.val(n.args[1])
        args, kwargs = rec.rebuild_args(list(tensors))
        fake_out = rec.rebuild_output([t for t in (n.meta.get("val") or [])])
        call = LeafCall(
            self.b, rec.module, rec.path, args, kwargs, fake_out, self.label(n), self.line(n)
        )
        result = run_leaf(call)
        flat, _ = torch.utils._pytree.tree_flatten(result)
        return [u for u in flat if isinstance(u, Use)]

    def ew(self, n: torch.fx.Node, family: list[EwOp]) -> Any:
        first = family[0]
        name = _name(n.target)
        if first.arity == 2 and first.name in (
            "add",
            "sub",
            "mul",
            "div",
            "pow",
            "maximum",
            "minimum",
        ):
            if n.kwargs.get("rounding_mode") is not None:
                raise Unsupported(f"{self.desc(n)}: division with rounding_mode is not supported")
            self.check_inplace(n)
            x = self.val(n.args[0])
            if name.endswith("_") and isinstance(x, Use) and self._is_counter(x):
                return x  # num_batches_tracked += 1: part of the batch norm's running-stat update
            return self.b.binary(first.name, x, self.val(n.args[1]), n.kwargs.get("alpha", 1))
        params: dict[str, Any] = {}
        for p in first.params:
            pos = p.aten_pos
            if pos is not None and len(n.args) > pos:
                params[p.name] = self.val(n.args[pos])
            elif p.kwarg is not None and p.kwarg in n.kwargs:
                params[p.name] = self.val(n.kwargs[p.kwarg])
            else:
                params[p.name] = p.default
        if name == "clamp_max":
            params = {"lo": None, "hi": self.val(n.args[1])}
        op = select_op(family, params)
        if op is None:
            raise Unsupported(f"{self.desc(n)}: this variant is not supported")
        self.check_inplace(n)
        return self.b.ew_op(op, [self.val(a) for a in n.args[: op.arity]], params)

    def _is_counter(self, u: Use) -> bool:
        leaf = self.g.leaves.get(u.vid)
        path = leaf.path if leaf is not None else None
        return path is not None and path.rpartition(".")[2] == "num_batches_tracked"

    def check_inplace(self, n: torch.fx.Node) -> None:
        """An in-place ATen op is computed out of place: refuse where a view would see it."""
        if not _name(n.target).endswith("_"):
            return
        src = n.args[0]
        if not isinstance(src, torch.fx.Node):
            return
        if src.op == "call_function" and _name(src.target) in _VIEWS:
            if not _private_view(src):
                raise Unsupported(f"{self.desc(n)}: an in-place op on a view")
            return
        if any(u.op == "call_function" and _name(u.target) in _VIEWS for u in src.users):
            raise Unsupported(f"{self.desc(n)}: an in-place op on a tensor that has views")

    def state_leaf(self, n: torch.fx.Node, name: str) -> Use:
        if name not in self.state_names:
            raise Unsupported(f"{self.desc(n)}: batch norm without num_batches_tracked")
        t = self._state_tensor(name)
        return self.b.leaf("buffer", name, tuple(t.shape), str(t.dtype).removeprefix("torch."))


_VIEWS = frozenset(
    {"view", "_unsafe_view", "slice", "select", "permute", "transpose", "t", "expand", "unsqueeze"}
    | {"squeeze", "alias", "split", "unfold", "as_strided"}
)


def _private_view(view: torch.fx.Node) -> bool:
    """A view whose writes nobody else can see: each link of its chain back to a value the
    forward computed (`mlp(x)`'s GEMM output reshaped, then `+=`) has this one user, so computing
    the in-place op out of place changes nothing (Falcon's `mlp_output += attention_output`)."""

    def readers(node: torch.fx.Node) -> int:  # a view that nothing reads is no reader
        return sum(1 for u in node.users if u.users or _name(u.target) not in _VIEWS)

    node = view
    while node.op == "call_function" and _name(node.target) in _VIEWS:
        base = node.args[0]
        if readers(node) != 1 or not isinstance(base, torch.fx.Node):
            return False
        node = base
    return node.op == "call_function" and readers(node) == 1 and not returns_alias(node.target)


HALF_DTYPES = ("bfloat16", "float16")
# The most values of a constant made inside forward that the generated file spells out.
MAX_CONSTANT = 1024

# Past this many ATen ops the forward is an unrolled loop, not a program worth one kernel each.
MAX_ATEN_NODES = 20000


def capture_aten(
    model: nn.Module, inputs: list[Any], input_names: list[str], path: str | None
) -> Graph:
    for name, mod in model.named_modules():
        if isinstance(mod, nn.RNNBase) and leaf_rule(mod) is None:
            raise Unsupported(
                f"self.{name} ({type(mod).__name__}) is not supported: a recurrent module is "
                "captured whole or not at all (at the ATen level it unrolls step by step)"
            )
    try:
        return _opaque_where_needed(model, inputs, input_names, path, functional=False)
    except Unsupported as exc:
        if not any(why in str(exc) for why in _WRITES_THROUGH_VIEWS):
            raise
        first = exc
    # In-place writes through views (LongT5's `scores += bias` on a transposed view, timm
    # MViTv2's copy_ into slices of a new tensor): the functional trace spells them as
    # out-of-place ops and scatters into the base, and keeps the first refusal if it fails too.
    try:
        graph = _opaque_where_needed(model, inputs, input_names, path, functional=True)
    except Unsupported:
        raise first from None
    graph.notes.append(
        "in-place writes through views were traced functionally (out of place, with scatters "
        "into their base)"
    )
    return graph


# How many times a trace may stop on data before the model is refused.
MAX_OPAQUE_TRIES = 6


def _opaque_where_needed(
    model: nn.Module, inputs: list[Any], input_names: list[str], path: str | None, functional: bool
) -> Graph:
    """The trace, again with each data-dependent submodule's type as opaque PyTorch calls where
    the trace stops on values (opaque_modules); the first refusal where that cannot help."""
    types: dict[type, str] = {}
    rejected: set[type] = set()  # types that cannot be one call (NotOpaque)
    first: Unsupported | None = None
    for _ in range(MAX_OPAQUE_TRIES):
        with marked(model, types) as used:
            try:
                graph = _capture(model, inputs, input_names, path, functional)
            except (DataDependent, NotOpaque) as exc:
                first = first or exc
                at = exc.path if isinstance(exc, NotOpaque) else module_at_fault(exc, model)
                if isinstance(exc, NotOpaque) and at:
                    kind = type(model.get_submodule(at))
                    why = types.pop(kind, str(exc))
                    rejected.add(kind)
                else:
                    why = str(exc).removeprefix("ATen-level capture failed: ")
                # up from a module that cannot be one call, or that is one and still stops the
                # trace (a parent calling it through a method other than forward)
                while at and type(model.get_submodule(at)) in rejected | set(types):
                    at = at.rpartition(".")[0]
                if not at:
                    if isinstance(exc, NotOpaque):  # why the module around it cannot be a call
                        raise Unsupported(
                            f"{first} (and it cannot run as a PyTorch call: {exc})"
                        ) from None
                    raise first from None
                types[type(model.get_submodule(at))] = why
                continue
        names = sorted(t.__name__ for t in used)
        if names:
            graph.notes.append(
                f"data-dependent modules run as PyTorch calls ({', '.join(names)}): the "
                "program runs on plain launches"
            )
        return graph
    assert first is not None
    raise first


# The refusals a functional trace can lift: writes through views, and copies into slices.
_WRITES_THROUGH_VIEWS = (
    "an in-place op on a view",
    "an in-place op on a tensor that has views",
    "copy_ into a computed tensor",
)


def _capture(
    model: nn.Module, inputs: list[Any], input_names: list[str], path: str | None, functional: bool
) -> Graph:
    try:
        gm, names, plain, records = trace(model, inputs, functional)
    except Unsupported:
        raise
    except Exception as exc:
        where = where_suffix(traceback_frames(exc.__traceback__), path)
        message = f"ATen-level capture failed: {type(exc).__name__}: {_first_line(exc)}{where}"
        if type(exc).__name__ in DATA_DEPENDENT:
            raise DataDependent(message) from exc
        raise Unsupported(message) from exc
    folded = fold_constant_masks(gm)
    count = len(gm.graph.nodes)
    if count > MAX_ATEN_NODES:
        raise Unsupported(f"forward unrolls into {count} ATen ops (more than {MAX_ATEN_NODES})")
    graph = AtenConverter(gm, names, plain, records, model, inputs, input_names, path).run()
    if folded:
        graph.notes.append(folded)
    return graph


def _materialise_fill(node: Node) -> None:
    """A constant fill (`ew identity` of one number, recomputed wherever it is read) becomes
    `aten.full`, a tensor PyTorch makes, so that an in-place write into it can run as well."""
    (value,) = node.args
    assert isinstance(value, Const)
    dtype = node.dtype if node.dtype in DTYPES.values() else "float32"
    node.kind = "aten"
    node.fn = "full.default"
    node.args = []
    node.params = {
        "call": f"torch.ops.aten.full.default({list(node.shape)!r}, "
        f"{python_literal(float(value.value))}, "
        f"dtype=torch.{dtype}, device=dev)",
        "dtype": dtype,
        "why": "the reference writes into it in place",
    }


def _unread_trailing_draws(gm: torch.fx.GraphModule) -> set[torch.fx.Node]:
    """Random draws nothing reads and no read draw follows (LayerDrop's `torch.rand([])`, read
    only when training): leaving them out shifts no random number the program uses. An unread
    draw before a read one is kept, since the later one depends on the generator's state."""
    out: set[torch.fx.Node] = set()
    for n in reversed(gm.graph.nodes):
        if draws_random(n):
            if n.users:
                break
            out.add(n)
    return out


def _dead(n: torch.fx.Node) -> bool:
    """A pure ATen call whose result nothing reads: the trace keeps it, the program need not."""
    schema = getattr(n.target, "_schema", None)
    return (
        n.op == "call_function"
        and not n.users
        and schema is not None
        and not schema.is_mutable
        and not draws_random(n)
    )


def _may_fall_back(n: torch.fx.Node) -> bool:
    """An ATen call of the model's own forward (not a leaf module, not a tuple's item)."""
    return (
        n.op == "call_function"
        and n.target is not operator.getitem
        and n.target is not LEAF_OP
        and hasattr(n.target, "_schema")
    )


def _reason(text: str, *names: str) -> str:
    """A refusal without the op's own description in front: why the op falls back."""
    for name in names:
        if text == f"{name} is not supported by the builtin coder":
            return "no lowering in the op catalogue"
        if text.startswith(name + ": "):
            return text[len(name) + 2 :]
    return text


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
