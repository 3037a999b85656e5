"""Checks on CUDA code, in `.cu` files and in CUDA strings of Python files."""

from __future__ import annotations

from collections.abc import Callable

from stitch_lsp.analysis.cuda_facts import CudaFacts, Span
from stitch_lsp.analysis.diag import Diag, Range
from stitch_lsp.models.findings import Severity


def cuda_diagnostics(
    facts: CudaFacts,
    to_range: Callable[[Span], Range],
    *,
    launched: set[str],
    check_unused: bool,
    check_streams: bool,
) -> list[Diag]:
    """`launched` holds every kernel name launched or referenced anywhere the kernels can be
    reached from (the whole file, or every string of the same Python file)."""
    out: list[Diag] = []
    if check_unused:
        for fn in facts.kernels:
            if fn.kind == "kernel" and not fn.extern_c and fn.name not in launched:
                out.append(
                    Diag(
                        to_range(fn.name_span),
                        Severity.warning,
                        "kernel-unused",
                        f"kernel `{fn.name}` is never launched: it does no work",
                    )
                )
    for launch in facts.launches:
        threads = launch.block_threads
        if threads is not None and launch.block_span is not None and threads % 32:
            out.append(
                Diag(
                    to_range(launch.block_span),
                    Severity.warning,
                    "block-size",
                    f"{threads} threads per block is not a multiple of 32 (the warp size): "
                    f"the last warp of every block runs partly idle",
                )
            )
        if not launch.error_checked:
            out.append(
                Diag(
                    to_range(launch.name_span),
                    Severity.hint,
                    "launch-unchecked",
                    f"launch of `{launch.kernel}` is not followed by an error check "
                    f"(cudaGetLastError or C10_CUDA_KERNEL_LAUNCH_CHECK)",
                )
            )
    for span, macro, name in facts.pasted:
        out.append(
            Diag(
                to_range(span),
                Severity.warning,
                "token-paste",
                f"`{macro}(...)` pastes together `{name}` with `##`: a CUDA or library API name "
                "hidden from review and from the checks that look for it",
            )
        )
    for span, why in facts.event_joins:
        out.append(Diag(to_range(span), Severity.warning, "event-join", why))
    if check_streams:
        for span in facts.stream_creations:
            out.append(
                Diag(
                    to_range(span),
                    Severity.warning,
                    "side-stream",
                    "creates a CUDA stream: work on a side stream is invisible to the timer "
                    "on the current stream; launch on the current stream instead",
                )
            )
    return out
