"""What the ATen trace patches while it runs, and why: library idioms that would otherwise
fail on fake meta tensors, or lose what the trace needs. Each patch is one context manager,
undone when the trace ends; `library_idioms_traceable` applies them all.

The trace runs the model for real on fake tensors backed by the meta device. Tensors made from
Python numbers would lose their values there, transformers memoises helpers across calls,
autocast asks the meta device for a type, `torch._grouped_mm`'s shape function takes bf16 only,
`module.to()` cannot swap the trace's stand-in parameters, transformers' `is_tracing` would
build masks that eager skips, and make_fx keeps only `forward` frames of a node's stack.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.experimental.proxy_tensor import PythonKeyTracer
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import (
    TorchDispatchMode,
    _disable_current_modes,
    _get_current_dispatch_mode_stack,
)
from torch.utils.weak import WeakIdKeyDictionary

from stitch_lsp.compiler.ir import Unsupported
from stitch_lsp.compiler.worker.opaque_modules import DataDependent


@contextlib.contextmanager
def _swapped(owner: Any, name: str, value: Any) -> Iterator[None]:
    """`owner.name` is `value` while the trace runs, and what it was again afterwards."""
    original = getattr(owner, name)
    setattr(owner, name, value)
    try:
        yield
    finally:
        setattr(owner, name, original)


@contextlib.contextmanager
def library_idioms_traceable() -> Iterator[None]:
    """Every patch below, for the length of one trace."""
    with (
        _whole_stacks(),
        _scalars_keep_their_value(),
        _library_caches_bypassed(),
        _autocast_on_meta(),
        _grouped_mm_of_any_float(),
        _module_to_in_forward(),
        _functional_tensors_count_as_tracing(),
        _known_values_are_not_traced(),
    ):
        yield


@contextlib.contextmanager
def _autocast_on_meta() -> Iterator[None]:
    """`with torch.autocast(device_type=x.device.type, enabled=False)` (timm's EfficientViT keeps
    its attention in float32 that way) asks for the meta device's autocast type while this trace
    runs on meta tensors, which PyTorch cannot answer. Switched off, autocast changes nothing, so
    it is a plain block here; switched on, it would change the reference's precision, and that
    is refused by name."""
    original = torch.autocast

    def autocast(device_type: str, *args: Any, **kwargs: Any) -> Any:
        enabled = kwargs.get("enabled", args[1] if len(args) > 1 else True)
        if device_type != "meta":
            return original(device_type, *args, **kwargs)
        if not enabled:
            return contextlib.nullcontext()
        raise Unsupported("torch.autocast switched on inside forward is not supported")

    with _swapped(torch, "autocast", autocast):
        yield


@contextlib.contextmanager
def _module_to_in_forward() -> Iterator[None]:
    """`self.classifier = self.classifier.to(self.dtype)` inside forward (Switch Transformers'
    router, kept in float32 "for stability"): on a module already of that type it changes
    nothing, and is a no-op here (PyTorch could not swap the trace's stand-in parameters). A
    conversion that would change the weights' type makes the calling module a PyTorch call
    (opaque_modules), which converts them on its first call as the reference does; on a real
    module (that call's CPU run for its output shapes) it converts as usual."""
    original = nn.Module.to

    def to(self: nn.Module, *args: Any, **kwargs: Any) -> nn.Module:
        _, dtype, _, _ = torch._C._nn._parse_to(*args, **kwargs)
        floats = [t for t in (*self.parameters(), *self.buffers()) if t.is_floating_point()]
        if dtype is None or all(t.dtype == dtype for t in floats):
            return self
        if not any(t.is_meta or isinstance(t, FakeTensor) for t in floats):
            return original(self, *args, **kwargs)  # a real module (opaque_modules' CPU run)
        # the module that calls this becomes a PyTorch call (opaque_modules), which converts
        # its weights on its first call as the reference does
        raise DataDependent(
            f"{type(self).__name__}.to({dtype}) inside forward changes the module's weights"
        )

    with _swapped(nn.Module, "to", to):
        yield


@contextlib.contextmanager
def _grouped_mm_of_any_float() -> Iterator[None]:
    """transformers' mixtures of experts (Mixtral, Qwen2-MoE: `experts_implementation=
    "grouped_mm"`, its default) call `torch._grouped_mm`. Its CPU kernel takes float32, but its
    shape function on the meta device, where this trace runs, takes bfloat16 only, so a float32
    or float16 model could not be traced. While tracing, the shape function sees the operands as
    bfloat16 and the result keeps their dtype; the op stays in the trace as it is, a PyTorch
    call that runs wherever the model's own call does."""
    meta = sys.modules.get("torch._meta_registrations")
    original = getattr(meta, "_meta_grouped_mm_common", None)
    if original is None:
        yield
        return

    def any_float(
        mat_a: Any, mat_b: Any, scale_a: Any = None, scale_b: Any = None, **kw: Any
    ) -> Any:
        dtype = mat_a.dtype
        if scale_a is None and dtype == mat_b.dtype and dtype in (torch.float32, torch.float16):
            out = original(mat_a.to(torch.bfloat16), mat_b.to(torch.bfloat16), None, None, **kw)
            return out.to(dtype if kw.get("out_dtype") is None else kw["out_dtype"])
        return original(mat_a, mat_b, scale_a, scale_b, **kw)

    with _swapped(meta, "_meta_grouped_mm_common", any_float):
        yield


@contextlib.contextmanager
def _functional_tensors_count_as_tracing() -> Iterator[None]:
    """transformers skips its value checks while tracing (`is_tracing` looks for fake
    tensors); under the functional trace it is handed functional wrappers around the fakes,
    which it did not recognise, and read an input's values (`pad_token_id in input_ids`)."""
    utils = sys.modules.get("transformers.utils.import_utils")
    original = getattr(utils, "is_fake_tensor", None)
    if original is None:
        yield
        return

    def is_fake_tensor(t: Any) -> bool:
        functional = isinstance(t, torch.Tensor) and torch._is_functional_tensor(t)
        return functional or bool(original(t))

    with _swapped(utils, "is_fake_tensor", is_fake_tensor):
        yield


@contextlib.contextmanager
def _known_values_are_not_traced() -> Iterator[None]:
    """transformers' `is_tracing(mask)` is true for any fake tensor, and then it keeps masks that
    eager skips (a padding mask of all ones made inside forward): Nystromformer's landmark
    attention cannot take the full mask it would build. Where the trace keeps the tensor's values
    (`KnownValues`), eager takes the same branch on every call of these shapes, so the check
    reads them as eager does."""
    utils = sys.modules.get("transformers.utils.import_utils")
    original = getattr(utils, "is_tracing", None)
    if original is None:
        yield
        return

    def is_tracing(tensor: Any = None) -> bool:
        if tensor is not None and KnownValues.knows(tensor):
            return bool(original(None))
        return bool(original(tensor))

    users = [
        m
        for name, m in list(sys.modules.items())
        if name.startswith("transformers") and getattr(m, "is_tracing", None) is original
    ]
    with contextlib.ExitStack() as stack:
        for module in users:
            stack.enter_context(_swapped(module, "is_tracing", is_tracing))
        yield


@contextlib.contextmanager
def _library_caches_bypassed() -> Iterator[None]:
    """transformers memoises some tensor helpers (BEiT's and Data2Vec's relative position index,
    `compile_compatible_method_lru_cache`) for the life of the process. A second trace in the same
    worker would then read the first call's real tensor as a constant instead of the ops that make
    it, and a large one is refused. The decorator recomputes while torch.compile traces; it does so
    while this trace runs too."""
    utils = sys.modules.get("transformers.pytorch_utils")
    if utils is None or not hasattr(utils, "is_torchdynamo_compiling"):
        yield
        return
    with _swapped(utils, "is_torchdynamo_compiling", lambda: True):
        yield


@contextlib.contextmanager
def _whole_stacks() -> Iterator[None]:
    """make_fx keeps only the `forward` frames of a node's stack; a library helper's own frame
    (transformers' mask functions, a model's `scan` helper) is where a fallback or refusal is,
    so every frame from the first `forward` on is kept while tracing."""
    original = PythonKeyTracer._filter_traceback_frames

    def every_frame(self: Any, summary: Any) -> Any:
        self._record_forward_stack_traces_only = False
        return original(self, summary)

    with _swapped(PythonKeyTracer, "_filter_traceback_frames", every_frame):
        yield


def _numbers(data: Any) -> bool:
    """A (nested) list of Python numbers, nothing else."""
    if isinstance(data, (list, tuple)):
        return all(_numbers(d) for d in data)
    return isinstance(data, (bool, int, float))


def _made_off_meta(make: Any) -> Any:
    """`make` (torch.tensor or torch.as_tensor), except that numbers asked for on the meta device
    are made on the CPU: a 0-dim tensor stays there (0-dim CPU tensors mix with tensors of any
    device, as scalars do), a table is moved after, so the trace holds its values and the move."""

    def made(data: Any, *args: Any, device: Any = None, **kwargs: Any) -> torch.Tensor:
        if device is None or torch.device(device).type != "meta":
            return make(data, *args, device=device, **kwargs)
        if isinstance(data, (bool, int, float)):
            return make(data, *args, device="cpu", **kwargs)
        if isinstance(data, (list, tuple)) and _numbers(data):
            return make(data, *args, device="cpu", **kwargs).to(device)
        return make(data, *args, device=device, **kwargs)

    return made


@contextlib.contextmanager
def _scalars_keep_their_value() -> Iterator[None]:
    """The model is traced on the meta device, so `torch.tensor(0.0, device=mask.device)` (how
    transformers turns a boolean mask into an additive one) or `torch.as_tensor(shapes_list,
    device=x.device)` would lose its values: while tracing, they are made off the meta device
    (`_made_off_meta`), and so are the index tensors of list indices (`qkv[..., [-2], :]`)."""
    tensor: Any = torch.tensor
    as_tensor: Any = torch.as_tensor

    def index_list(v: Any) -> Any:
        if isinstance(v, list) and v and all(type(i) is int for i in v):
            return tensor(v, device="cpu")
        return v

    getitem = torch.Tensor.__getitem__

    def item(self: torch.Tensor, index: Any) -> Any:
        # On the CPU the index list keeps its values, and indexing takes index tensors of
        # another device.
        if self.device.type == "meta":
            index = tuple(map(index_list, index)) if isinstance(index, tuple) else index_list(index)
        return getitem(self, index)

    new_tensor = torch.Tensor.new_tensor
    made = _made_off_meta(tensor)

    def new(self: torch.Tensor, data: Any, *args: Any, **kwargs: Any) -> torch.Tensor:
        # `pos.new_tensor([1 - 2**k])` (Funnel): the type and device are self's
        if self.device.type == "meta" and _numbers(data):
            kwargs.setdefault("dtype", self.dtype)
            return made(data, *args, device=kwargs.pop("device", self.device), **kwargs)
        return new_tensor(self, data, *args, **kwargs)

    with (
        _swapped(torch, "tensor", made),
        _swapped(torch, "as_tensor", _made_off_meta(as_tensor)),
        _swapped(torch.Tensor, "__getitem__", item),
        _swapped(torch.Tensor, "new_tensor", new),
    ):
        yield


# The largest tensor whose values the trace keeps beside its fake (a position table, a mask
# made with torch.ones): the values are computed on the CPU, op by op.
KNOWN_VALUES_NUMEL = 1 << 16


class KnownValues(TorchDispatchMode):
    """Values that forward computes from Python numbers and shapes alone: `torch.arange` of
    positions and arithmetic on them (Funnel's relative-position bounds), a default mask made
    with `torch.ones` and tested with `.any().item()` (Longformer). On fake tensors `.item()`
    of such a value has no answer; this mode keeps each one's real value (small tensors, on the
    CPU) beside its fake, op by op, and answers `.item()` from it. A value that reads an input,
    a parameter or a buffer has none, and its `.item()` is refused as before; an in-place op
    forgets the kept values that share the memory it writes."""

    def __init__(self) -> None:
        super().__init__()
        self.values = WeakIdKeyDictionary()  # by identity: tensors compare elementwise

    @staticmethod
    def knows(t: Any) -> bool:
        """Whether the running trace (the innermost KnownValues on the dispatch mode stack)
        keeps `t`'s values, through a functional trace's wrapper."""
        modes = [m for m in _get_current_dispatch_mode_stack() if isinstance(m, KnownValues)]
        if not modes or not isinstance(t, torch.Tensor):
            return False
        if torch._is_functional_tensor(t):
            t = torch._from_functional_tensor(t)
        return t in modes[-1].values

    def _forget_written(self, schema: Any, args: Any, kwargs: Any) -> None:
        """An in-place op: every kept value that shares memory with what it writes is stale."""
        written = [
            args[i] if i < len(args) else kwargs.get(a.name)
            for i, a in enumerate(schema.arguments)
            if a.alias_info is not None and a.alias_info.is_write
        ]
        memory = {_storage(t) for t in written if isinstance(t, torch.Tensor)}
        for t in [t for t in self.values if _storage(t) in memory or None in memory]:
            del self.values[t]

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default:
            known = self.values.get(args[0])
            if known is not None:
                return known.item()
        out = func(*args, **kwargs)
        schema = getattr(func, "_schema", None)
        mutates = schema is not None and schema.is_mutable
        if torch.Tag.nondeterministic_seeded in getattr(func, "tags", ()):
            return out
        real = self._real_arguments(args, kwargs)
        if real is None or not (mutates or isinstance(out, torch.Tensor)):
            if mutates:
                self._forget_written(schema, args, kwargs)
            return out
        try:
            with _disable_current_modes():
                value = func(*real[0], **real[1])  # in place on the kept values, if it mutates
        except Exception:  # no CPU kernel for these values: nothing is kept
            if mutates:
                self._forget_written(schema, args, kwargs)
            return out
        if (
            isinstance(out, torch.Tensor)
            and isinstance(value, torch.Tensor)
            and tuple(value.shape) == tuple(out.shape)
            and out.numel() <= KNOWN_VALUES_NUMEL
        ):
            self.values[out] = value
        return out

    def _real_arguments(self, args: Any, kwargs: Any) -> tuple[Any, Any] | None:
        """The op's arguments with each tensor's kept value (a real tensor the trace holds, such
        as a table made from Python numbers, is its own), or None if one has none."""
        flat, spec = torch.utils._pytree.tree_flatten((args, kwargs))
        real = []
        for a in flat:
            if isinstance(a, torch.Tensor):
                known = self.values.get(a)
                if known is None and _real(a):
                    known = a
                if known is None:
                    return None
                real.append(known)
            elif isinstance(a, torch.device):
                real.append(torch.device("cpu"))
            else:
                real.append(a)
        return torch.utils._pytree.tree_unflatten(real, spec)


def _storage(t: torch.Tensor) -> Any:
    """What identifies a tensor's memory (views share it), or None where it has none."""
    try:
        return StorageWeakRef(t.untyped_storage())
    except Exception:
        return None


def _real(t: torch.Tensor) -> bool:
    """A small tensor with values on the CPU, not a trace's fake."""
    return (
        not isinstance(t, FakeTensor) and t.device.type == "cpu" and t.numel() <= KNOWN_VALUES_NUMEL
    )
