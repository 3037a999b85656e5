"""The op registry: every PyTorch operator stitch-lsp knows, once, with its kind and spellings.

One `register_op` per op (or family of spellings that do the same work). Everything that asks
"what is this op?" reads this table:

- the two capture paths find the lowering of a torch function, a tensor method or an ATen op
  through its spellings (`compiler.worker.lowering`);
- the planner's anchors, views and subtask labels come from the kinds (`is_anchor`,
  `is_view`, `short_name`);
- the static checks' heavy and light lists are the names of heavy and light kinds
  (`analysis.torch_ops`).

Elementwise ops are entries of `catalog.EW_OPS` (they carry a CUDA expression too); they are
registered here from that table, so adding one is still one `EwOp` entry.

This module is torch-free: spellings are dotted names that the worker side resolves.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from stitch_lsp.compiler.catalog import EW_OPS


class OpKind(str, Enum):
    gemm = "gemm"
    conv = "conv"
    attention = "attention"
    recurrent = "recurrent"
    elementwise = "elementwise"
    reduction = "reduction"
    norm = "norm"
    pool = "pool"
    resample = "resample"
    loss = "loss"
    dropout = "dropout"
    embedding = "embedding"
    view = "view"
    data = "data"  # copies and moves of data: cat, stack, pad, roll, clone
    factory = "factory"
    random = "random"


HEAVY_KINDS: frozenset[OpKind] = frozenset(
    {OpKind.gemm, OpKind.conv, OpKind.attention, OpKind.recurrent}
)
"""What cuBLAS/cuDNN do well: an honest solution may keep these in PyTorch."""
LIGHT_KINDS: frozenset[OpKind] = frozenset(
    {
        OpKind.elementwise,
        OpKind.reduction,
        OpKind.norm,
        OpKind.pool,
        OpKind.resample,
        OpKind.loss,
        OpKind.dropout,
        OpKind.embedding,
    }
)
"""The work a fused kernel should absorb."""


@dataclass(frozen=True)
class OpDef:
    """One op. `names` are its bare torch-level names (`torch.X`, `F.X`, `Tensor.X`), what the
    static checks and the planner see; `functions`, `methods`, `modules` and `aten` are the
    spellings capture resolves (dotted, method names, module types, ATen op names);
    `short` labels a subtask that holds it."""

    name: str
    kind: OpKind
    names: tuple[str, ...] = ()
    functions: tuple[str, ...] = ()
    methods: tuple[str, ...] = ()
    modules: tuple[str, ...] = ()
    aten: tuple[str, ...] = ()
    short: str = ""


OPS: dict[str, OpDef] = {}
_BY_NAME: dict[str, OpDef] = {}  # bare names and module type names -> the first op to claim them


def register_op(
    name: str,
    kind: OpKind,
    *,
    names: tuple[str, ...] | None = None,
    functions: tuple[str, ...] = (),
    methods: tuple[str, ...] = (),
    modules: tuple[str, ...] = (),
    aten: tuple[str, ...] = (),
    short: str = "",
) -> OpDef:
    """Add one op; `names` defaults to the op's own name."""
    if name in OPS:
        raise ValueError(f"op {name!r} is registered twice")
    spelled = (name,) if names is None else names
    op = OpDef(name, kind, spelled, functions, methods, modules, aten, short)
    OPS[name] = op
    for key in (*op.names, *(m.rpartition(".")[2] for m in op.modules)):
        _BY_NAME.setdefault(key, op)
    return op


def _words(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_T = "torch."
_F = "torch.nn.functional."
_NN = "torch.nn."

# -- heavy: GEMMs, convolutions, attention, recurrent -------------------------------------------
register_op(
    "matmul",
    OpKind.gemm,
    names=_words("matmul mm bmm"),
    functions=("torch.matmul", "operator.matmul", "torch.mm", "torch.bmm"),
    methods=("matmul", "mm", "bmm"),
    aten=("mm", "bmm", "matmul"),
)
register_op(
    "linear",
    OpKind.gemm,
    functions=(_F + "linear",),
    aten=("linear",),
    modules=(_NN + "Linear", _NN + "LazyLinear"),
    short="linear",
)
register_op("addmm", OpKind.gemm, functions=("torch.addmm",), aten=("addmm",), short="linear")
register_op("baddbmm", OpKind.gemm, aten=("baddbmm",))
for _name in _words("addbmm addmv mv tensordot"):
    register_op(_name, OpKind.gemm)
register_op("einsum", OpKind.gemm, functions=("torch.einsum",))
register_op("bilinear", OpKind.gemm, modules=(_NN + "Bilinear",))
register_op(
    "conv",
    OpKind.conv,
    names=_words(
        "conv1d conv2d conv3d conv_transpose1d conv_transpose2d conv_transpose3d conv_tbc"
    ),
    modules=tuple(_NN + m for m in _words("Conv1d Conv2d Conv3d LazyConv1d LazyConv2d LazyConv3d")),
    aten=("convolution",),
    short="conv",
)
register_op(
    "conv_transpose",
    OpKind.conv,
    names=(),
    modules=tuple(_NN + m for m in _words("ConvTranspose1d ConvTranspose2d ConvTranspose3d")),
    short="convT",
)
register_op(
    "scaled_dot_product_attention",
    OpKind.attention,
    names=("scaled_dot_product_attention", "multi_head_attention_forward"),
    functions=(_F + "scaled_dot_product_attention",),
    aten=("scaled_dot_product_attention",),
    modules=tuple(
        _NN + m
        for m in _words(
            "MultiheadAttention Transformer TransformerEncoder TransformerDecoder "
            "TransformerEncoderLayer TransformerDecoderLayer"
        )
    ),
    short="sdpa",
)
register_op(
    "rnn",
    OpKind.recurrent,
    names=_words("lstm gru rnn_tanh rnn_relu"),
    modules=(_NN + "LSTM", _NN + "GRU", _NN + "RNN"),
)

# -- reductions -----------------------------------------------------------------------------------
register_op("sum", OpKind.reduction, functions=("torch.sum",), methods=("sum",), aten=("sum",))
register_op("mean", OpKind.reduction, functions=("torch.mean",), methods=("mean",), aten=("mean",))
register_op(
    "amax",
    OpKind.reduction,
    names=("amax", "amin"),
    functions=("torch.amax", "torch.amin"),
    methods=("amax", "amin"),
    aten=("amax", "amin"),
)
register_op(
    "max",
    OpKind.reduction,
    names=(),
    functions=("torch.max", "torch.min"),
    methods=("max", "min"),
    aten=("max", "min"),
)
register_op(
    "argmax",
    OpKind.reduction,
    names=("argmax", "argmin"),
    functions=("torch.argmax", "torch.argmin"),
    methods=("argmax", "argmin"),
    aten=("argmax", "argmin"),
)
register_op(
    "logsumexp",
    OpKind.reduction,
    functions=("torch.logsumexp",),
    methods=("logsumexp",),
    aten=("logsumexp",),
)
register_op(
    "cumsum", OpKind.reduction, functions=("torch.cumsum",), methods=("cumsum",), aten=("cumsum",)
)
register_op(
    "softmax",
    OpKind.reduction,
    names=("softmax", "log_softmax", "softmin"),
    functions=("torch.softmax", _F + "softmax", "torch.log_softmax", _F + "log_softmax"),
    methods=("softmax", "log_softmax"),
    modules=(_NN + "Softmax", _NN + "LogSoftmax"),
    aten=("_softmax", "_log_softmax", "softmax", "log_softmax", "_safe_softmax"),
)
register_op("vector_norm", OpKind.reduction, names=("norm",), aten=("linalg_vector_norm",))
register_op(
    "var",
    OpKind.reduction,
    names=("var", "std"),
    functions=("torch.var", "torch.std"),
    methods=("var", "std"),
    aten=("var", "std"),
)
for _name in _words(
    "prod cumprod cummax cummin diff sort topk cosine_similarity pairwise_distance cdist"
):
    register_op(_name, OpKind.reduction)

# -- normalisation ----------------------------------------------------------------------------
register_op(
    "layer_norm",
    OpKind.norm,
    functions=(_F + "layer_norm",),
    modules=(_NN + "LayerNorm",),
    aten=("native_layer_norm",),
    short="ln",
)
register_op(
    "group_norm",
    OpKind.norm,
    functions=(_F + "group_norm",),
    modules=(_NN + "GroupNorm",),
    aten=("native_group_norm",),
    short="gn",
)
register_op(
    "batch_norm",
    OpKind.norm,
    functions=(_F + "batch_norm",),
    modules=tuple(_NN + m for m in _words("BatchNorm1d BatchNorm2d BatchNorm3d")),
    aten=(
        "_native_batch_norm_legit",
        "native_batch_norm",
        "_native_batch_norm_legit_no_training",
    ),
    short="bn",
)
register_op(
    "instance_norm", OpKind.norm, modules=tuple(_NN + f"InstanceNorm{d}d" for d in (1, 2, 3))
)
register_op("normalize", OpKind.norm, functions=(_F + "normalize",))
for _name in _words("rms_norm local_response_norm"):
    register_op(_name, OpKind.norm)

# -- pooling and resampling ------------------------------------------------------------------
register_op(
    "max_pool",
    OpKind.pool,
    names=_words("max_pool1d max_pool2d max_pool3d"),
    functions=tuple(_F + f"max_pool{d}d" for d in (1, 2, 3)),
    modules=tuple(_NN + f"MaxPool{d}d" for d in (1, 2, 3)),
    aten=_words("max_pool1d max_pool2d max_pool3d max_pool2d_with_indices max_pool3d_with_indices"),
    short="maxpool",
)
register_op(
    "avg_pool",
    OpKind.pool,
    names=_words("avg_pool1d avg_pool2d avg_pool3d"),
    functions=tuple(_F + f"avg_pool{d}d" for d in (1, 2, 3)),
    modules=tuple(_NN + f"AvgPool{d}d" for d in (1, 2, 3)),
    aten=_words("avg_pool1d avg_pool2d avg_pool3d"),
    short="avgpool",
)
register_op(
    "adaptive_avg_pool",
    OpKind.pool,
    names=_words("adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d"),
    functions=tuple(_F + f"adaptive_avg_pool{d}d" for d in (1, 2, 3)),
    modules=tuple(_NN + f"AdaptiveAvgPool{d}d" for d in (1, 2, 3)),
    aten=_words(
        "_adaptive_avg_pool2d adaptive_avg_pool2d adaptive_avg_pool1d _adaptive_avg_pool3d "
        "adaptive_avg_pool3d"
    ),
    short="avgpool",
)
register_op(
    "adaptive_max_pool",
    OpKind.pool,
    names=_words("adaptive_max_pool1d adaptive_max_pool2d adaptive_max_pool3d"),
    functions=tuple(_F + f"adaptive_max_pool{d}d" for d in (1, 2, 3)),
    modules=tuple(_NN + f"AdaptiveMaxPool{d}d" for d in (1, 2, 3)),
    aten=_words("adaptive_max_pool2d adaptive_max_pool1d adaptive_max_pool3d"),
)
register_op("lp_pool2d", OpKind.pool)
register_op("interpolate", OpKind.resample, names=("interpolate", "upsample"))

# -- losses -----------------------------------------------------------------------------------
for _name in _words(
    "cross_entropy mse_loss l1_loss smooth_l1_loss huber_loss kl_div nll_loss "
    "binary_cross_entropy binary_cross_entropy_with_logits hinge_embedding_loss "
    "triplet_margin_loss margin_ranking_loss"
):
    register_op(_name, OpKind.loss)

# -- dropout and embedding ----------------------------------------------------------------------
register_op(
    "dropout",
    OpKind.dropout,
    names=_words("dropout dropout1d dropout2d dropout3d alpha_dropout"),
    functions=tuple(_F + f for f in _words("dropout dropout1d dropout2d dropout3d alpha_dropout")),
    modules=(_NN + "Dropout",),
    aten=_words("dropout native_dropout feature_dropout alpha_dropout"),
)
register_op(
    "stochastic_depth",
    OpKind.dropout,
    names=(),
    functions=("torchvision.ops.stochastic_depth.stochastic_depth",),
)
register_op("embedding", OpKind.embedding, functions=(_F + "embedding",), aten=("embedding",))
# `table[index]` as ATen records it: rows picked by one int64 tensor (a rotary table read at the
# decode position, a relative-position bias table); other advanced indexing falls back
register_op("index_rows", OpKind.embedding, names=(), aten=("index",))

# -- views: no work, no traffic when fused --------------------------------------------------------
register_op(
    "view",
    OpKind.view,
    names=("view", "reshape"),
    functions=("torch.reshape",),
    methods=("view", "reshape"),
    aten=("view", "_unsafe_view", "reshape"),
)
register_op("view_as", OpKind.view, methods=("view_as", "reshape_as"))
register_op(
    "flatten",
    OpKind.view,
    functions=("torch.flatten",),
    methods=("flatten",),
    modules=(_NN + "Flatten",),
)
register_op("unflatten", OpKind.view)
register_op(
    "alias",
    OpKind.view,
    names=("getitem", "getattr", "size", "dim", "Identity"),
    functions=("torch.clone", "torch.detach"),
    methods=("clone", "detach", "float", "cuda", "cpu", "type_as", "requires_grad_"),
    modules=(_NN + "Identity",),
    aten=("alias", "detach", "lift_fresh_copy", "lift_fresh"),
)
register_op(
    "permute", OpKind.view, functions=("torch.permute",), methods=("permute",), aten=("permute",)
)
register_op(
    "transpose",
    OpKind.view,
    functions=("torch.transpose", "torch.swapaxes", "torch.swapdims"),
    methods=("transpose", "swapaxes", "swapdims"),
    aten=("transpose",),
)
register_op("t", OpKind.view, functions=("torch.t",), methods=("t",), aten=("t", "numpy_T"))
register_op("expand", OpKind.view, methods=("expand", "broadcast_to"), aten=("expand",))
register_op("expand_as", OpKind.view, methods=("expand_as",))
register_op(
    "unsqueeze",
    OpKind.view,
    functions=("torch.unsqueeze",),
    methods=("unsqueeze",),
    aten=("unsqueeze",),
)
register_op(
    "squeeze", OpKind.view, functions=("torch.squeeze",), methods=("squeeze",), aten=("squeeze",)
)
register_op(
    "narrow", OpKind.view, functions=("torch.narrow",), methods=("narrow",), aten=("narrow",)
)
register_op("slice", OpKind.view, names=(), aten=("slice",))
register_op("select", OpKind.view, aten=("select",))
register_op(
    "split",
    OpKind.view,
    functions=("torch.split",),
    methods=("split",),
    aten=("split", "split_with_sizes"),
)
register_op("chunk", OpKind.view, functions=("torch.chunk",), methods=("chunk",), aten=("chunk",))
register_op(
    "unbind", OpKind.view, functions=("torch.unbind",), methods=("unbind",), aten=("unbind",)
)
register_op(
    "relative_position_bias",
    OpKind.view,
    names=(),
    functions=("torchvision.models.swin_transformer._get_relative_position_bias",),
)
register_op("unfold", OpKind.view, names=(), methods=("unfold",), aten=("unfold",))

# -- data movement ------------------------------------------------------------------------------
register_op(
    "contiguous", OpKind.data, names=(), methods=("contiguous",), aten=("clone", "contiguous")
)
register_op("to", OpKind.data, names=(), methods=("to",), aten=("_to_copy", "to"))
register_op("repeat", OpKind.data, names=(), methods=("repeat",), aten=("repeat",))
register_op(
    "cat",
    OpKind.data,
    names=(),
    functions=("torch.cat", "torch.concat", "torch.concatenate"),
    aten=("cat", "concat"),
)
register_op("stack", OpKind.data, names=(), functions=("torch.stack",), aten=("stack",))
register_op(
    "roll", OpKind.data, names=(), functions=("torch.roll",), methods=("roll",), aten=("roll",)
)
register_op("pad", OpKind.data, names=(), functions=(_F + "pad",), aten=("constant_pad_nd",))
register_op(
    "masked_fill",
    OpKind.data,
    names=(),
    functions=("torch.masked_fill",),
    methods=("masked_fill", "masked_fill_"),
    aten=("masked_fill",),
)
register_op("copy", OpKind.data, names=(), methods=("copy_",), aten=("copy_", "copy"))

# -- factories and random numbers ---------------------------------------------------------------
register_op(
    "fill",
    OpKind.factory,
    names=(),
    functions=tuple(_T + f for f in _words("zeros ones zeros_like ones_like full full_like")),
    aten=_words(
        "ones zeros full ones_like zeros_like full_like new_ones new_zeros new_full scalar_tensor"
    ),
)
register_op("tensor_literal", OpKind.factory, names=(), functions=("torch.tensor",))
register_op(
    "randn",
    OpKind.random,
    names=(),
    functions=("torch.randn", "torch.rand"),
    aten=("randn", "rand"),
)
register_op(
    "random",
    OpKind.random,
    names=(),
    functions=tuple(
        _T + f
        for f in _words("randint randperm normal rand_like randn_like randint_like bernoulli")
    ),
    aten=_words("bernoulli randint normal uniform rand_like randn_like randperm multinomial"),
)

# -- elementwise: from the catalog, plus spellings it does not carry ----------------------------
_EW_EXTRA = _words(
    "relu_ celu prelu rrelu glu logsigmoid tanhshrink threshold exp2 log2 log10 log1p expm1 "
    "erfc clip where true_divide floor_divide remainder fmod round trunc addcmul addcdiv lerp "
    "softsign clamp_min clamp_max"
)


def _ew_names() -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for op in EW_OPS:
        if op.result == "bool" or op.index:
            continue  # comparisons and masks: bookkeeping, not the work the checks look for
        for spelled in op.functions:
            head, _, last = spelled.rpartition(".")
            if head != "operator":
                seen.setdefault(last, None)
    for extra in _EW_EXTRA:
        seen.setdefault(extra, None)
    return tuple(seen)


register_op(
    "elementwise",
    OpKind.elementwise,
    names=_ew_names(),
    modules=tuple(m for op in EW_OPS for m in op.modules),
)
register_op("rsub", OpKind.elementwise, names=(), aten=("rsub",))
register_op("elu_aten", OpKind.elementwise, names=(), aten=("elu",))


# -- lookups ------------------------------------------------------------------------------------
def op_named(name: str) -> OpDef | None:
    """The op a bare name (`conv2d`, `Conv2d`, `relu`) or module type name stands for."""
    return _BY_NAME.get(name)


def names_of(kinds: frozenset[OpKind]) -> frozenset[str]:
    """Bare names of every op of these kinds (the static checks' heavy and light lists)."""
    return frozenset(n for op in OPS.values() if op.kind in kinds for n in op.names)


def layers_of(kinds: frozenset[OpKind]) -> frozenset[str]:
    """Module type names (`Conv2d`) of every op of these kinds."""
    return frozenset(
        m.rpartition(".")[2] for op in OPS.values() if op.kind in kinds for m in op.modules
    )


def is_anchor(name: str) -> bool:
    """A heavy op: the planner starts a fusion group at it and fuses what follows."""
    op = op_named(name)
    return op is not None and op.kind in HEAVY_KINDS


def is_view(name: str) -> bool:
    """An op that moves no data once fused (views, metadata, dropout in eval)."""
    op = op_named(name)
    return op is not None and op.kind in (OpKind.view, OpKind.dropout)


def short_name(name: str) -> str:
    """A subtask's label for an op: `conv`, `bn`, `ln`, ... or the op's lower-cased name."""
    op = op_named(name)
    return op.short if op is not None and op.short else name.lower()
