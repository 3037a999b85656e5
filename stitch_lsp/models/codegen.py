"""Records the builtin coder exchanges across the process boundary (server <-> torch worker).

The server never imports torch, so generation runs in `python -m stitch_lsp.compiler.worker.main`;
these models are its request and response, written as JSON files.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from stitch_lsp.models.base import Record

GroupKind = Literal["pointwise", "reduction", "gemm", "conv", "rnn", "scan", "attention", "aten"]


class CompiledGroup(Record):
    """One kernel or library call of a generated candidate and the reference ops it covers
    (the builtin compiler's output; a plan's groups are `PlannedGroup`s)."""

    name: str = Field(description="Launcher name in the generated CUDA, or the PyTorch call.")
    stage: int = Field(
        0, description="Position in the generated forward ('# stage N' in the candidate)."
    )
    kind: GroupKind
    ops: list[str] = Field(description="Reference ops fused here, in order, e.g. 'relu (line 12)'.")
    library: str | None = Field(None, description="cuBLAS / cuDNN (through PyTorch) for heavy ops.")
    layout: str | None = Field(None, description="Reduction layout, e.g. 'row 1024x8192'.")
    lines: list[int] = Field(default_factory=list, description="Reference source lines covered.")
    rewrites: list[str] = Field(
        default_factory=list, description="Algebra rewrites whose ops run here (compiler.rewrites)."
    )


class GenerateRequest(Record):
    reference: str = Field(description="Absolute path of the reference problem file.")
    candidate_dir: str | None = Field(
        None, description="Folder the candidate will be written into; sets the header's path."
    )
    reference_header: str | None = Field(
        None, description="The path the header names, as it is; overrides candidate_dir."
    )


class BuiltinCandidate(Record):
    """What the builtin coder made of a reference: a KernelBench-format candidate, or why not."""

    handled: bool
    source: str | None = Field(None, description="Whole candidate .py text (defines ModelNew).")
    reason: str = Field("", description="Why the module is not handled (empty when handled).")
    groups: list[CompiledGroup] = Field(default_factory=list)
    rewrites: list[str] = Field(
        default_factory=list,
        description="Algebra rewrites applied before partitioning, 'name: where' each.",
    )
    graph_summary: str = Field("", description="The captured graph, one op per line.")
    cuda_source: str | None = Field(None, description="The CUDA held by the candidate.")
    seconds: float = 0.0


class GenerateBatch(Record):
    """Several references in one worker, so `import torch` is paid once (the bench uses this)."""

    items: list[GenerateRequest]


class CandidateBatch(Record):
    items: list[BuiltinCandidate]
