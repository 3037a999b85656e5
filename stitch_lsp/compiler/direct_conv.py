"""Transposed convolutions with few terms per output, computed in the kernel that reads them.

With 3 input channels (KernelBench's ConvTranspose3d 3 -> 16 at stride 2, in six held-out
level-2 problems) cuDNN's fp32 transposed convolution runs at under 0.5 TFLOPs on an H100: it is
most of the 13-21 ms that eager and torch.compile take on such a problem (BENCHMARKS.md, session
16), for an output that a kernel writes at the memory's speed. (Our reading, not profiled: it
runs as the data gradient of a forward convolution, whose GEMM has 3 columns.) The same library
runs a 16-channel one at 20 TFLOPs or more.

Each output element of such a convolution is a short sum: the input channels of its group times
the taps that land on it (at stride s, about one in s per dimension). The generated kernel
computes it as a pooling window is computed: inside the loop over output elements, from the
stored input and weight, looping over the landing taps only. Its pointwise and reduction tail
fuses into the same kernel, so the output reaches memory only where a later window reads it.

The rule is static (`runs_direct`): transposed, dilation 1, at most `MAX_TERMS` products per
output. A forward convolution stays on cuDNN, which runs it as an implicit GEMM at full speed.
Torch-free.
"""

from __future__ import annotations

import math
from typing import cast

from stitch_lsp.compiler.ir import Graph, Node
from stitch_lsp.compiler.layout import spatial_coords

# Products per output element at most: 3 input channels x 8 landing taps (3x3x3 at stride 2).
MAX_TERMS = 32


def terms_per_output(node: Node) -> int:
    """Input channels per group times the taps that land on one output (the most, at any
    output position): ceil(k / s) per spatial dimension."""
    x, w = node.uses[:2]
    groups = int(cast(int, node.params.get("groups", 1)))
    stride: tuple[int, ...] = node.params["stride"]  # type: ignore[assignment]
    taps = math.prod(-(-k // s) for k, s in zip(w.shape[2:], stride, strict=True))
    return (x.shape[1] // groups) * taps


def runs_direct(node: Node) -> bool:
    """Whether this convolution runs in the generated kernel instead of cuDNN."""
    if node.kind != "conv" or not node.fn.startswith("conv_transpose"):
        return False
    # The loops read the input as contiguous NC... and the weight as contiguous (Cin, Cout/g, k...).
    if node.params.get("channels_last") or any(u.strided or u.trans for u in node.uses[:2]):
        return False
    if isinstance(node.params.get("padding"), str):
        return False
    dilation: tuple[int, ...] = node.params.get("dilation", ())  # type: ignore[assignment]
    if any(d != 1 for d in dilation):
        return False
    return terms_per_output(node) <= MAX_TERMS


def mark_direct(graph: Graph) -> list[Node]:
    """Marks (params["direct"]) and returns the convolutions that run in generated kernels."""
    out = [n for n in graph.nodes if runs_direct(n)]
    for n in out:
        n.params["direct"] = True
    return out


def direct_conv_lines(node: Node, index: str, name: str, x_load: str, w_load: str) -> list[str]:
    """C++ that sets float `name` to output element `index` (flat, NCDHW) of transposed
    convolution `node`. `x_load` and `w_load` are format strings: a load at flat offset
    `{0}` of the input and of the weight (Cin, Cout / groups, k...)."""
    x, w = node.uses[:2]
    out, inp, kern = node.shape, x.shape, w.shape[2:]
    nd = len(out) - 2
    stride: tuple[int, ...] = node.params["stride"]  # type: ignore[assignment]
    pad: tuple[int, ...] = node.params["padding"]  # type: ignore[assignment]
    groups = int(cast(int, node.params.get("groups", 1)))
    cin_g, cout_g = inp[1] // groups, out[1] // groups
    coords, step = spatial_coords(index, out)
    lines = [f"float {name} = 0.f;", "{", *coords]
    lines.append(f"  const idx_t co = ({index} / {step}) % {out[1]};")
    lines.append(f"  const idx_t nb = {index} / {step * out[1]};")
    lines.append(f"  const idx_t c0 = (co / {cout_g}) * {cin_g}, cg = co % {cout_g};")
    lines.append(f"  for (int ci = 0; ci < {cin_g}; ++ci) {{")
    xoff, woff = f"(nb * {inp[1]} + c0 + ci)", f"((c0 + ci) * {cout_g} + cg)"
    depth = 2
    for d in range(nd):
        ax, s, p, k = d + 2, stride[d], pad[d], kern[d]
        ind = "  " * depth
        # o = i * s - p + t: the taps t that land on o are those with t = (o + p) mod s.
        lines += [
            f"{ind}for (int t{ax} = (int)((o{ax} + {p}) % {s}); t{ax} < {k}; t{ax} += {s}) {{",
            f"{ind}  const idx_t i{ax} = (o{ax} + {p} - t{ax}) / {s};",
            f"{ind}  if (i{ax} < 0 || i{ax} >= {inp[ax]}) continue;",
        ]
        xoff = f"({xoff} * {inp[ax]} + i{ax})"
        woff = f"({woff} * {k} + t{ax})"
        depth += 1
    ind = "  " * depth
    lines.append(f"{ind}{name} += {x_load.format(xoff)} * {w_load.format(woff)};")
    lines += ["  " * i + "}" for i in range(depth - 1, 0, -1)]
    lines.append("}")
    return lines


def is_direct(node: Node) -> bool:
    return node.kind == "conv" and bool(node.params.get("direct"))
