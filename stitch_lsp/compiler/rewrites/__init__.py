"""Algebraic rewrites of the IR graph that remove work, one catalogue entry per identity.

They run after capture and before partitioning (`apply_rewrites`), to a fixed point, and each
application is recorded so that the candidate says which identities it relies on. Every entry is
exact in real arithmetic; in float32 an entry may reassociate (a product of two constants, a sum
of weight rows taken before the dot product), and its test bounds that error against float64.

What the catalogue does not do, and why:
- fold a scale or bias tensor into a GEMM's or a convolution's weights: the weights a rewrite
  derives are prepared once per weight change (program.preparation), but the scale it saves is
  a multiply inside an epilogue kernel that reads the GEMM's output anyway;
- fold a batch norm: KernelBench modules run in training mode, where the statistics come from
  the batch and the running buffers are updated, so there is nothing constant to fold (a pool
  may still move above its per-channel arithmetic, which is the same across each window).

The entries live by what they shrink: pointwise.py (elementwise chains), linear.py (GEMMs),
horizontal.py (GEMMs of one input, side by side), convolution.py, pools.py; surgery.py holds
the graph edits they share. Torch-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from stitch_lsp.compiler.ir import Graph
from stitch_lsp.compiler.rewrites.convolution import (
    pool_before_pointwise_conv,
    pool_of_conv_transpose,
    spatial_sum_of_conv_transpose,
)
from stitch_lsp.compiler.rewrites.horizontal import gemms_sharing_an_input
from stitch_lsp.compiler.rewrites.linear import pool_before_linear, sum_before_linear
from stitch_lsp.compiler.rewrites.pointwise import (
    affine_chain,
    centred_sum_cancels,
    redundant_clamp,
    scale_past_sum,
    self_add_as_scale,
    written_out_gelu_tanh,
)
from stitch_lsp.compiler.rewrites.pools import pool_before_channel_affine, pool_of_pool
from stitch_lsp.compiler.rewrites.surgery import Applied

__all__ = ["BY_NAME", "CATALOGUE", "Applied", "Rewrite", "apply_rewrites"]

Apply = Callable[[Graph], list[Applied]]


@dataclass(frozen=True)
class Rewrite:
    name: str
    identity: str  # the algebra, in one line
    apply: Apply


def _channels_last(graph: Graph) -> list[Applied]:
    """Convolutions that read an NHWC storage as NCHW run channels-last, and elementwise ops
    between them follow their operands' storage order (relayout.py): exact, only where values
    lie changes."""
    from stitch_lsp.compiler.relayout import channels_last

    convs = [n for n in channels_last(graph) if n.kind == "conv" and n in graph.nodes]
    if not convs:
        return []
    sites = ", ".join(dict.fromkeys(n.origin for n in convs))
    count = f"{len(convs)} convolution{'s' if len(convs) > 1 else ''}"
    return [Applied("channels_last", f"{count} run NHWC ({sites})", {n.vid for n in convs})]


def _written_out_attention(graph: Graph) -> list[Applied]:
    """softmax(q k^T c + m) v spelled out (two batched GEMMs around a softmax) as the flash
    kernel's attn node, in bf16/fp16 (attention_pattern.py): the scores never reach memory."""
    from stitch_lsp.compiler.attention_pattern import written_out_attention

    return [
        Applied("written_out_attention", f"{first.origin} .. {second.origin}", {attn.vid})
        for first, second, attn in written_out_attention(graph)
    ]


CATALOGUE: tuple[Rewrite, ...] = (
    Rewrite(
        "written_out_gelu_tanh",
        "0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = gelu(x, approximate='tanh')",
        written_out_gelu_tanh,
    ),
    Rewrite("self_add_as_scale", "x + x = 2 x", self_add_as_scale),
    Rewrite(
        "redundant_clamp",
        "clamp(f(x), lo, hi) = f(x) where f's range lies in [lo, hi]",
        redundant_clamp,
    ),
    Rewrite("centred_sum_cancels", "sum(x - mean(x, d), d) = 0", centred_sum_cancels),
    Rewrite("scale_past_sum", "sum(c x) = c sum(x)", scale_past_sum),
    Rewrite(
        "sum_before_linear", "sum_j (x W^T + b)_j = x (sum_j W_j) + sum_j b_j", sum_before_linear
    ),
    Rewrite("affine_chain", "((x k1 + m1) k2 + m2) = x (k1 k2) + (m1 k2 + m2)", affine_chain),
    Rewrite(
        "pool_before_linear",
        "avg_pool(x W^T + b, k) = x (avg_pool_rows(W, k))^T + avg_pool(b, k)",
        pool_before_linear,
    ),
    Rewrite(
        "spatial_sum_of_conv_transpose",
        "sum_dims(conv_transpose(x, W) + b) = conv_transpose_rest(sum_tap_ranges x, W) + n b",
        spatial_sum_of_conv_transpose,
    ),
    Rewrite(
        "pool_before_channel_affine",
        "avg_pool(u a + b) = avg_pool(u) a + b for a, b constant over each window",
        pool_before_channel_affine,
    ),
    Rewrite(
        "pool_of_pool",
        "pool_k2(pool_k1(x)) = pool_(k1 k2)(x) (averages or maxima) for windows that tile",
        pool_of_pool,
    ),
    Rewrite(
        "pool_of_conv_transpose",
        "avg_pool_k(conv_transpose_k(x, W)) = conv(x, mean of W's taps per window offset)",
        pool_of_conv_transpose,
    ),
    Rewrite(
        "pool_before_pointwise_conv",
        "avg_pool(conv1x1(z)) = conv1x1(avg_pool(z))",
        pool_before_pointwise_conv,
    ),
    Rewrite(
        "gemms_sharing_an_input",
        "x W_1^T, ..., x W_n^T = column ranges of x [W_1; ...; W_n]^T (q, k, v; gate, up)",
        gemms_sharing_an_input,
    ),
    Rewrite(
        "channels_last",
        "conv(permute(x)) = permute(conv_nhwc(x)); f(permute(a), ...) = permute(f(a, ...))",
        _channels_last,
    ),
    Rewrite(
        "written_out_attention",
        "softmax(q k^T c + m) v = flash_attention(q, k, v, mask=m, scale=c)",
        _written_out_attention,
    ),
)

BY_NAME: dict[str, Rewrite] = {r.name: r for r in CATALOGUE}


def apply_rewrites(graph: Graph, names: tuple[str, ...] | None = None) -> list[Applied]:
    """Apply the catalogue (or the entries named) until none fires; dead nodes are pruned."""
    entries = CATALOGUE if names is None else tuple(BY_NAME[n] for n in names)
    applied: list[Applied] = []
    for _ in range(8):
        fired = [a for r in entries for a in r.apply(graph)]
        if not fired:
            break
        applied += fired
        graph.prune()
    return applied
