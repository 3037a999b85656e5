"""Which Python calls are PyTorch compute, and how heavy.

"Heavy" operators (GEMM, convolution, attention, RNNs) are what cuBLAS/cuDNN do well: an honest
solution may keep them in PyTorch. "Light" ones (elementwise, reductions, normalisation,
pooling, losses) are what a fused kernel should absorb. Allocation, views and dtype/device
moves are neither and are never flagged.
"""

from __future__ import annotations

import re

from stitch_lsp.analysis.names import Ref
from stitch_lsp.compiler.ops import HEAVY_KINDS, LIGHT_KINDS, OpKind, layers_of, names_of

# The op registry's heavy kinds (GEMM, convolution, attention, recurrent) and light ones
# (elementwise, reductions, normalisation, pooling, losses, dropout, embedding), by bare name.
HEAVY_OPS = names_of(HEAVY_KINDS)
LIGHT_OPS = names_of(LIGHT_KINDS)
# Reductions/elementwise that are also common non-tensor method names; only flagged when the
# callee is clearly torch (torch.max, F.max_pool2d), never as `obj.max(...)`.
_AMBIGUOUS_METHODS = frozenset({"max", "min", "add", "sort", "round", "pow", "abs", "sum"})
HEAVY_LAYERS = layers_of(HEAVY_KINDS)
# Modules whose functions share names with tensor methods (math.sqrt, np.exp) but are not
# PyTorch work on the GPU.
_NOT_TENSORS = frozenset(
    {"math", "cmath", "np", "numpy", "random", "operator", "statistics", "cp", "cupy", "tl"}
)
_NOT_COMPUTE_LAYERS = frozenset({"Module", "ModuleList", "ModuleDict", "Identity", "Parameter"})
_TORCH_NAMESPACES = re.compile(
    r"^(torch|torch\.nn\.functional|nn\.functional|F|torch\.special|torch\.linalg|torch\.fft"
    r"|torch\.Tensor|torch\.ops\.aten)\.(\w+)$"
)


def is_handle_use(callee: str, handles: set[str]) -> bool:
    """`ext.fn`, `self.ext.fn`, `_get_ext().fn` all use the handle `ext`/`self.ext`/`_get_ext`."""
    head = re.sub(r"\(.*?\)", "", callee)
    while True:
        if head in handles:
            return True
        if "." not in head:
            return False
        head = head.rsplit(".", 1)[0]


def classify_call(callee: str, layers: dict[str, str], handles: set[str]) -> tuple[str, str] | None:
    """("heavy"|"light", op name) when a call is a PyTorch compute operator, else None."""
    if is_handle_use(callee, handles) or (
        callee.startswith("torch.ops.") and not callee.startswith("torch.ops.aten.")
    ):
        return None
    if callee in layers:
        ctor = layers[callee]
        # torch.nn layers only; the file's own helper modules are not PyTorch's work.
        if not ctor.startswith(("nn.", "torch.nn.")):
            return None
        layer = ctor.rsplit(".", 1)[-1]
        if layer in _NOT_COMPUTE_LAYERS or not layer[:1].isupper():
            return None
        return ("heavy" if layer in HEAVY_LAYERS else "light", f"nn.{layer}")
    m = _TORCH_NAMESPACES.match(callee)
    if m:
        op = m.group(2)
        if op in HEAVY_OPS:
            return "heavy", callee
        if op in LIGHT_OPS or op in ("max", "min"):
            return "light", callee
        return None
    if "." in callee:
        obj, op = callee.rsplit(".", 1)
        if (obj.startswith("self.") and obj in layers) or obj in _NOT_TENSORS:
            return None
        if op.endswith("_") and not op.startswith("_") and op[:-1] in HEAVY_OPS | LIGHT_OPS:
            # In-place (`out.addmm_(a, b)`, `y.add_(b)`): only tensors have these methods.
            base = op[:-1]
            return ("heavy" if base in HEAVY_OPS else "light"), f".{op}()"
        if op in HEAVY_OPS and op not in ("linear", "lstm", "gru"):
            return "heavy", f".{op}()"
        if op in LIGHT_OPS and op not in _AMBIGUOUS_METHODS:
            return "light", f".{op}()"
    return None


# Families of operators that do the same work, so `torch.mm` in ModelNew matches a reference
# that calls `nn.Linear` or `@`.
_FAMILIES = {
    "gemm": names_of(frozenset({OpKind.gemm})) - {"bilinear"} | {"Linear"},
}


def op_family(op: str) -> str:
    """The family an operator or layer belongs to ("gemm" for every GEMM spelling)."""
    op = op.rsplit(".", 1)[-1].rsplit("::", 1)[-1].strip("()@ ")
    for family, members in _FAMILIES.items():
        if op in members or op == "matmul":
            return family
    layer = _LAYER_FUNCTIONAL.get(op)
    return layer or op


# nn layers and the functional operator they run.
_LAYER_FUNCTIONAL = {
    "Conv1d": "conv1d",
    "Conv2d": "conv2d",
    "Conv3d": "conv3d",
    "ConvTranspose1d": "conv_transpose1d",
    "ConvTranspose2d": "conv_transpose2d",
    "ConvTranspose3d": "conv_transpose3d",
    "ReLU": "relu",
    "GELU": "gelu",
    "Sigmoid": "sigmoid",
    "Tanh": "tanh",
    "Softmax": "softmax",
    "LogSoftmax": "log_softmax",
    "LayerNorm": "layer_norm",
    "GroupNorm": "group_norm",
    "BatchNorm1d": "batch_norm",
    "BatchNorm2d": "batch_norm",
    "BatchNorm3d": "batch_norm",
    "InstanceNorm2d": "instance_norm",
    "MaxPool2d": "max_pool2d",
    "AvgPool2d": "avg_pool2d",
}


def torch_op(dotted: str) -> str | None:
    """The operator a dotted path in torch's namespace runs (`torch.ops.aten.mm.default` ->
    `mm`, `torch.Tensor.addmm_` -> `addmm`), or None when it is not a compute operator."""
    if "()" in dotted:
        return _method_of_result(dotted)
    parts = dotted.split(".")
    if len(parts) < 2 or parts[0] != "torch":
        return None
    if parts[1] == "ops":
        if len(parts) < 4 or parts[2] != "aten":
            return None  # a custom operator library: someone's own kernels
        op = parts[3]
    else:
        op = parts[-1]
    if op.endswith("_") and not op.startswith("_") and op[:-1] in HEAVY_OPS | LIGHT_OPS:
        op = op[:-1]
    if op in HEAVY_OPS or op in LIGHT_OPS or op in ("max", "min"):
        return op
    return None


# torch functions whose results are not tensors (streams, extensions, devices, handles).
_NOT_TENSOR_RESULTS = (
    "torch.utils.",
    "torch.cuda.",
    "torch.backends.",
    "torch.library.",
    "torch.jit.",
    "torch.compile",
    "torch._dynamo.",
    "torch.ops.",
    "torch.device",
    "torch.Generator",
    "torch.Size",
    "torch.autograd.",
    "torch.profiler.",
    "torch.distributed.",
)


def _method_of_result(dotted: str) -> str | None:
    """`torch.empty().relu_` (a method of a tensor some torch function returned) -> `relu`."""
    producer = dotted.rsplit("().", 1)[0]
    if "()" in producer or not producer.startswith("torch."):
        return None
    if producer.startswith(_NOT_TENSOR_RESULTS):
        return None
    op = dotted.rsplit(".", 1)[-1]
    if op.endswith("_") and not op.startswith("_") and op[:-1] in HEAVY_OPS | LIGHT_OPS:
        op = op[:-1]
    if op in HEAVY_OPS or op in LIGHT_OPS or op in ("max", "min"):
        return op
    return None


def layer_of(dotted: str) -> str | None:
    """`torch.nn.Conv2d` -> `Conv2d` for a torch.nn layer class that computes."""
    if not dotted.startswith(("torch.nn.", "nn.")):
        return None
    layer = dotted.rsplit(".", 1)[-1]
    if layer in _NOT_COMPUTE_LAYERS or not layer[:1].isupper():
        return None
    return layer


def classify_resolved(
    callee: str, ref: Ref | None, handles: set[str]
) -> tuple[str, str, str] | None:
    """("heavy"|"light", op as shown, canonical name) when a call runs a PyTorch compute
    operator, seeing through aliases; None otherwise. `ref` is what the callee resolved to."""
    if is_handle_use(callee, handles) or (
        callee.startswith("torch.ops.") and not callee.startswith("torch.ops.aten.")
    ):
        return None
    if ref is not None and ref.spelled is not None:
        callee, ref = ref.spelled, None
    found = _classify_ref(callee, ref) if ref is not None else "by name"
    if found != "by name":
        return found  # type: ignore[return-value]
    by_name = classify_call(callee, {}, handles)
    if by_name is None:
        return None
    return by_name[0], by_name[1], by_name[1]


def _classify_ref(callee: str, ref: Ref) -> tuple[str, str, str] | str | None:
    """Classification from what the callee resolved to, or "by name" when only its spelling
    can tell (a method of a value whose type is unknown)."""
    if ref.node is not None or ref.string is not None:
        return None  # this file's own function, class or lambda: its body is checked
    dotted = ref.dotted or ""
    instance = ref.instance
    if dotted.endswith(("().forward", "().__call__")):
        dotted, instance = dotted.rsplit("().", 1)[0], True
    if instance:
        layer = layer_of(dotted)
        if layer is None:
            return None
        weight = "heavy" if layer in HEAVY_LAYERS else "light"
        return weight, f"nn.{layer}", f"torch.nn.{layer}"
    if "()" in dotted:
        op = _method_of_result(dotted)
        if op is not None:
            weight = "heavy" if op in HEAVY_OPS else "light"
            return weight, f".{dotted.rsplit('.', 1)[-1]}()", f"torch.Tensor.{op}"
        producer = dotted.rsplit("().", 1)[0]
        if dotted.split(".", 1)[0] in _NOT_TENSORS or (
            "()" not in producer and producer.startswith(("torch.", *_NOT_TENSORS))
        ):
            return None  # the result of a known non-tensor call (a stream, an extension)
        return "by name"  # a method of some other call's result: judge it by its name
    if dotted.startswith("torch."):
        op = torch_op(dotted)
        if op is None:
            return None
        return ("heavy" if op in HEAVY_OPS else "light"), callee, dotted
    if "." in dotted and dotted.split(".", 1)[0] not in ("F", "nn"):
        return None  # numpy, math, cupy, another module: not PyTorch
    return "by name"


# Vendor-library entry points that do a heavy op themselves (cuBLAS/cuBLASLt GEMMs, cuDNN
# convolutions), and the operator families they stand for: `cublasSgemm` in the launcher is the
# reference's `torch.matmul` as much as `at::mm` in the wrapper is.
_VENDOR_HEAVY = (
    (re.compile(r"^cublas(Lt)?\w*(gemm|Gemm|Matmul)\w*$"), frozenset({"gemm"})),
    (
        re.compile(r"^cudnnConvolution(Forward|BiasActivationForward)$"),
        frozenset({"conv1d", "conv2d", "conv3d"}),
    ),
    (
        re.compile(r"^cudnnConvolutionBackwardData$"),
        frozenset({"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"}),
    ),
)


def vendor_families(call: str) -> frozenset[str]:
    """The operator families a cuBLAS/cuDNN call computes (empty for handles, descriptors,
    streams and every other library call)."""
    for pattern, families in _VENDOR_HEAVY:
        if pattern.match(call):
            return families
    return frozenset()
