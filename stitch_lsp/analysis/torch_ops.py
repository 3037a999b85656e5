"""Which Python calls are PyTorch compute, and how heavy.

"Heavy" operators (GEMM, convolution, attention, RNNs) are what cuBLAS/cuDNN do well: an honest
solution may keep them in PyTorch. "Light" ones (elementwise, reductions, normalisation,
pooling, losses) are what a fused kernel should absorb. Allocation, views and dtype/device
moves are neither and are never flagged.
"""

from __future__ import annotations

import re


def _words(block: str) -> frozenset[str]:
    return frozenset(block.split())


# Operators that cuBLAS/cuDNN do well; keeping them in PyTorch is honest but not covered.
HEAVY_OPS = _words(
    """
    matmul mm bmm addmm addbmm baddbmm addmv mv einsum tensordot linear bilinear conv1d conv2d
    conv3d conv_transpose1d conv_transpose2d conv_transpose3d conv_tbc
    scaled_dot_product_attention multi_head_attention_forward lstm gru rnn_tanh rnn_relu
    """
)
# Elementwise, reduction, normalisation and pooling operators: the work a fused kernel does.
LIGHT_OPS = _words(
    """
    relu relu_ relu6 gelu silu sigmoid tanh softmax log_softmax softmin softplus softsign mish
    hardtanh hardswish hardsigmoid leaky_relu elu selu celu prelu rrelu glu logsigmoid
    tanhshrink threshold dropout dropout1d dropout2d dropout3d alpha_dropout layer_norm
    group_norm batch_norm instance_norm rms_norm local_response_norm normalize sum mean amax
    amin argmax argmin prod std var norm logsumexp cumsum cumprod exp exp2 log log2 log10 log1p
    expm1 sqrt rsqrt pow abs neg clamp clamp_min clamp_max clip where add sub mul div
    true_divide floor_divide remainder fmod maximum minimum erf erfc sin cos square reciprocal
    sign floor ceil round trunc sort topk max_pool1d max_pool2d max_pool3d avg_pool1d avg_pool2d
    avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d adaptive_avg_pool3d adaptive_max_pool1d
    adaptive_max_pool2d adaptive_max_pool3d lp_pool2d interpolate upsample cross_entropy
    mse_loss l1_loss smooth_l1_loss huber_loss kl_div nll_loss binary_cross_entropy
    binary_cross_entropy_with_logits hinge_embedding_loss triplet_margin_loss
    margin_ranking_loss cosine_similarity pairwise_distance cdist embedding addcmul addcdiv lerp
    cummax cummin diff
    """
)
# Reductions/elementwise that are also common non-tensor method names; only flagged when the
# callee is clearly torch (torch.max, F.max_pool2d), never as `obj.max(...)`.
_AMBIGUOUS_METHODS = frozenset({"max", "min", "add", "sort", "round", "pow", "abs", "sum"})
HEAVY_LAYERS = _words(
    """
    Linear Bilinear LazyLinear Conv1d Conv2d Conv3d ConvTranspose1d ConvTranspose2d
    ConvTranspose3d LazyConv1d LazyConv2d LazyConv3d LSTM GRU RNN MultiheadAttention Transformer
    TransformerEncoder TransformerDecoder TransformerEncoderLayer TransformerDecoderLayer
    """
)
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
        if op in HEAVY_OPS and op not in ("linear", "lstm", "gru"):
            return "heavy", f".{op}()"
        if op in LIGHT_OPS and op not in _AMBIGUOUS_METHODS:
            return "light", f".{op}()"
    return None
