"""Attribution: whose kernels ran the candidate's GPU time. No torch here.

StitchCUDA counts "fake CUDA acceleration" as major hacking: the heavy op (the GEMM or the
convolution) stays in PyTorch or a vendor library and the custom CUDA only copies, scales or
finishes the result. A static check sees `torch::matmul` or `cublasSgemm` when it is spelled;
the timeline sees it however it is spelled. Every kernel of a profiled forward is put in one
class:

- `own`: a `__global__` function (or Triton kernel) the candidate's sources define, or one of
  the builtin coder's and runtime's `stitch_*` kernels;
- `vendor`: cuBLAS, cuBLASLt, cuDNN, CUTLASS (nvjet, xmma, sm90_..., implicit_convolve, ...);
- `pytorch`: ATen, c10, cub/thrust as PyTorch uses them, Inductor's Triton kernels;
- `other`: copies, memsets and kernels of no known origin.

Library namespaces are decided before the candidate's own names, so a decoy `__global__` named
like one of PyTorch's or cuBLAS's kernels does not turn their time into the candidate's.

A fused program may keep its GEMM or convolution on a vendor library (the paper names cuBLAS
epilogues as a technique): its share is only reported. Where the reference is that heavy op
alone, the candidate's own kernels must do the heavy work (`judge`).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence

from stitch_lsp import cuda_macros
from stitch_lsp.models.verify import Attribution, ExploitFinding, KernelShare
from stitch_lsp.verify.timeline import Call, short_name

OWN, VENDOR, PYTORCH, OTHER = "own", "vendor", "pytorch", "other"
CLASSES = (OWN, VENDOR, PYTORCH, OTHER)
OWN_FLOOR = 0.5  # own kernels at or above this share of GPU time do the work themselves
LIBRARY_FLOOR = 0.5  # ... and library kernels at or above this share do it for them
TOP_PER_CLASS = 3

# Names only a vendor library gives its kernels; checked before the candidate's own names.
_VENDOR = re.compile(
    r"nvjet|xmma|cutlass|cublas|cudnn|cutensor|cufft|(^|[^\w])sm\d{2,3}a?_"
    r"|^(ampere|volta|turing|hopper|maxwell|kepler|blackwell)_|gemmSN|gemmk1|gemv2|gemvx"
    r"|splitKreduce|implicit_convolve|precomputed_convolve|explicit_convolve|winograd"
    r"|conv2d_grouped_direct|fft2d_|fft_rc|fft_cr|nchwToNhwc|nhwcToNchw|scalePackedTensor"
    r"|cask_|fusedConvolution"
)
# PyTorch's namespaces and Inductor's generated kernels; also before the candidate's names.
_PYTORCH = re.compile(
    r"(^|[^\w])(at|c10|at_cuda_detail|cub|thrust|cuda_cub)::|^triton_(poi|per|red|tem|for|unk)_"
)
# Weaker signs, after the candidate's own names: kernels PyTorch defines outside those
# namespaces, and library-looking names.
_PYTORCH_WEAK = re.compile(
    r"elementwise_kernel|reduce_kernel|\(anonymous namespace\)|^cunn_|softmax_warp|"
    r"CatArrayBatchedCopy|^triton_|indexSelect|index_elementwise"
)
_VENDOR_WEAK = re.compile(r"gemm|conv|fprop|dgrad|wgrad", re.I)

# `__global__` definitions: the name is the identifier before the first parenthesis that is
# not `__launch_bounds__(...)` or an attribute.
_GLOBAL = re.compile(r"\b__global__\b")
_DECORATIONS = re.compile(r"__launch_bounds__\s*\([^)]*\)|__attribute__\s*\(\([^)]*\)\)")
_NAME_BEFORE_PAREN = re.compile(r"([A-Za-z_]\w*)\s*(?:<[^<>()]*>)?\s*\($")
_TRITON = re.compile(r"@\s*(?:triton\.)?jit\b[^\n]*\n(?:\s*@[^\n]*\n)*\s*def\s+([A-Za-z_]\w*)")

# ATen operators (overload packets) of a reference's forward that do no arithmetic: views,
# allocations, copies, metadata.
NEUTRAL_OPS = frozenset(
    {"t", "transpose", "permute", "view", "_unsafe_view", "reshape", "_reshape_alias", "expand",
     "expand_as", "squeeze", "unsqueeze", "as_strided", "slice", "select", "detach", "alias",
     "clone", "contiguous", "copy_", "_to_copy", "to", "empty", "empty_like", "empty_strided",
     "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros", "ones", "ones_like",
     "fill_", "zero_", "lift_fresh", "lift_fresh_copy", "split", "split_with_sizes", "chunk",
     "unbind", "flatten", "unflatten", "view_as", "narrow", "movedim", "numpy_T", "mT", "T",
     "resolve_conj", "resolve_neg", "_local_scalar_dense", "sym_size", "sym_stride", "size",
     "stride", "dim", "is_contiguous", "unsafe_view", "_unsafe_index", "set_", "resize_"}
)  # fmt: skip
_GEMM_OPS = frozenset(
    {"mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "mv", "addmv", "dot",
     "vdot", "inner", "einsum", "tensordot", "_mm", "_addmm"}
)  # fmt: skip
_CONV_OPS = frozenset(
    {"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d",
     "conv_transpose2d", "conv_transpose3d", "cudnn_convolution", "cudnn_convolution_transpose",
     "_convolution_mode", "miopen_convolution", "mkldnn_convolution", "_slow_conv2d_forward",
     "slow_conv3d_forward", "slow_conv_transpose2d", "slow_conv_transpose3d",
     "_conv_depthwise2d", "conv_depthwise3d", "slow_conv_dilated2d", "slow_conv_dilated3d",
     "thnn_conv2d"}
)  # fmt: skip
_ATTENTION_OPS = frozenset(
    {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
     "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
     "_scaled_dot_product_flash_attention_for_cpu", "_flash_attention_forward",
     "_efficient_attention_forward", "_scaled_dot_product_attention_math"}
)  # fmt: skip


def kernel_names(sources: Iterable[str]) -> set[str]:
    """The `__global__` functions (and Triton kernels) the texts define, by name."""
    out: set[str] = set()
    every: list[str] = []
    for text in sources:
        every.append(text)
        if "##" in text:  # kernels a macro defines: `DEFINE_ACT(relu)` -> `relu_kernel`
            every.extend(cuda_macros.expansions(text))
    for text in every:
        for m in _GLOBAL.finditer(text):
            window = _DECORATIONS.sub(" ", text[m.end() : m.end() + 400])
            cut = window.find("(")
            if cut < 0:
                continue
            found = _NAME_BEFORE_PAREN.search(window[: cut + 1])
            if found is not None and found.group(1) not in ("void", "__global__"):
                out.add(found.group(1))
        out.update(m.group(1) for m in _TRITON.finditer(text))
    return out


def classify(name: str, own: set[str] | frozenset[str]) -> str:
    """own | vendor | pytorch | other, for one kernel (its name as CUPTI reports it)."""
    short = short_name(name, limit=400)
    if _VENDOR.search(short):
        return VENDOR
    if _PYTORCH.search(short):
        return PYTORCH
    base = short.rsplit("::", 1)[-1]
    if base in own or base.startswith("stitch_"):
        return OWN
    if _PYTORCH_WEAK.search(short):
        return PYTORCH
    if _VENDOR_WEAK.search(short):
        return VENDOR
    return OTHER


def heavy_family(op: str) -> str | None:
    """gemm, conv or attention for an ATen operator of that family (`aten.addmm.default` ->
    gemm, `aten._scaled_dot_product_flash_attention.default` -> attention)."""
    packet = op.removeprefix("aten.").removeprefix("aten::").split(".", 1)[0]
    if packet in _GEMM_OPS:
        return "gemm"
    if packet in _CONV_OPS:
        return "conv"
    if packet in _ATTENTION_OPS:
        return "attention"
    return None


def compute_ops(ops: Iterable[str]) -> list[str]:
    """The operators that compute (views, allocations and copies left out), in order, once."""
    out: list[str] = []
    for op in ops:
        packet = op.removeprefix("aten.").removeprefix("aten::").split(".", 1)[0]
        neutral = packet in NEUTRAL_OPS or packet.rstrip("_") in NEUTRAL_OPS
        if packet and not neutral and packet not in out:
            out.append(packet)
    return out


def heavy_alone(ops: Iterable[str]) -> str | None:
    """`gemm`, `conv` or `attention` (or a `+` of them) when every operator the reference
    computes with is a GEMM, a convolution or attention: the reference is heavy work alone.
    None otherwise."""
    families: set[str] = set()
    computing = compute_ops(ops)
    if not computing:
        return None
    for op in computing:
        family = heavy_family(op)
        if family is None:
            return None
        families.add(family)
    return "+".join(sorted(families))


def attribute(
    calls: Sequence[Call],
    own: set[str] | frozenset[str],
    *,
    reference_ops: Sequence[str] = (),
) -> Attribution:
    """The shares of the forwards' GPU time (kernels, copies, memsets) per class."""
    n = max(len(calls), 1)
    per_class: dict[str, float] = defaultdict(float)
    per_kernel: dict[tuple[str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for call in calls:
        for a in call.work:
            ns = max(0, a.end_ns - a.start_ns)
            cls = classify(a.name, own) if a.kind == "kernel" else OTHER
            per_class[cls] += ns
            entry = per_kernel[(cls, short_name(a.name))]
            entry[0] += ns
            entry[1] += 1
    total = sum(per_class.values())
    top: dict[str, list[KernelShare]] = {}
    for cls in CLASSES:
        rows = sorted(
            ((name, v) for (c, name), v in per_kernel.items() if c == cls), key=lambda r: -r[1][0]
        )[:TOP_PER_CLASS]
        if rows:
            top[cls] = [
                KernelShare(
                    name=name, ms=ns / n / 1e6, calls=count / n, share=ns / total if total else 0.0
                )
                for name, (ns, count) in rows
            ]
    share = {c: (per_class[c] / total if total else 0.0) for c in CLASSES}
    computing = compute_ops(reference_ops)
    return Attribution(
        gpu_ms=total / n / 1e6,
        own=share[OWN],
        vendor=share[VENDOR],
        pytorch=share[PYTORCH],
        other=share[OTHER],
        own_kernels=sorted(own),
        top=top,
        reference_ops=computing,
        heavy_alone=heavy_alone(reference_ops) if reference_ops else None,
        note=None if total else "no GPU work recorded for the candidate",
    )


_FAMILY_TEXT = {
    "gemm": "a GEMM",
    "conv": "a convolution",
    "attention": "attention",
    "attention+gemm": "projections and attention",
    "conv+gemm": "GEMMs and convolutions",
}


def judge(attr: Attribution) -> ExploitFinding | None:
    """`stitch.exploit.heavy-op-not-custom` when the reference is one heavy op and library
    kernels, not the candidate's own, do most of the candidate's GPU work."""
    if attr.heavy_alone is None or attr.gpu_ms <= 0:
        return None
    library = attr.vendor + attr.pytorch
    if attr.own >= OWN_FLOOR or library < LIBRARY_FLOOR:
        return None
    rows = sorted(
        (k for cls in (VENDOR, PYTORCH) for k in attr.top.get(cls, [])), key=lambda k: -k.share
    )[:3]
    names = ", ".join(f"{k.name} ({k.share:.0%})" for k in rows)
    who = " and ".join(
        w for w, s in (("vendor libraries", attr.vendor), ("PyTorch", attr.pytorch)) if s > 0.05
    )
    what = _FAMILY_TEXT.get(attr.heavy_alone, attr.heavy_alone)
    return ExploitFinding(
        code="stitch.exploit.heavy-op-not-custom",
        message=(
            f"the reference is {what} alone ({', '.join(attr.reference_ops)}), and the "
            f"candidate's own kernels run {attr.own:.0%} of its GPU time while {who or 'library'}"
            f" kernels run {library:.0%}: {names}. The heavy op stays in the library and the "
            "custom CUDA only copies, scales or finishes its result: this is not a CUDA "
            "implementation"
        ),
        evidence={
            "own_share": round(attr.own, 4),
            "vendor_share": round(attr.vendor, 4),
            "pytorch_share": round(attr.pytorch, 4),
            "heavy": attr.heavy_alone,
            "kernels": "; ".join(k.name for k in rows),
        },
    )


def describe(attr: Attribution) -> str:
    """One line: `custom kernels: 18% of GPU time (vendor 80%: nvjet_tst_..., PyTorch 2%)`."""
    if attr.gpu_ms <= 0:
        return f"custom kernels: - ({attr.note or 'no GPU work recorded'})"
    parts = []
    for label, cls, value in (
        ("vendor", VENDOR, attr.vendor),
        ("PyTorch", PYTORCH, attr.pytorch),
        ("other", OTHER, attr.other),
    ):
        if value >= 0.005:
            first = attr.top.get(cls, [])
            parts.append(f"{label} {value:.0%}" + (f": {first[0].name}" if first else ""))
    tail = f" ({'; '.join(parts)})" if parts else ""
    return f"custom kernels: {attr.own:.0%} of GPU time{tail}"
