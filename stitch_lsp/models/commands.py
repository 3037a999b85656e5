"""Arguments and results of the server's `workspace/executeCommand` commands, as they travel.

Field names are snake_case in Python and camelCase on the wire (`speedup_vs_eager` is sent as
`speedupVsEager`), like every other LSP payload. Arguments come either as one object
(`[{"uri": ..., "full": true}]`) or positionally (`[uri, true]`); `parse_arguments` takes both.
Every result has `ok` and `message` (what went wrong, or what happened), and `state` when a
scheduler job did not finish (`cancelled`, `no_gpu`, `untrusted`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, TypeVar

from pydantic import AliasChoices, Field, ValidationError
from pydantic.alias_generators import to_camel

from stitch_lsp.models.base import WireModel
from stitch_lsp.models.profile import KernelSummary

A = TypeVar("A", bound=WireModel)


class CommandArgumentError(ValueError):
    """Arguments a command cannot take; the message shows the forms it accepts."""


def parse_arguments(model: type[A], args: Sequence[Any], command: str) -> A:
    """`[{...}]` or positional `[a, b, ...]` (in the model's field order) -> the model."""
    if len(args) == 1 and isinstance(args[0], dict):
        data: dict[str, Any] = args[0]
    else:
        data = dict(zip(model.model_fields, args, strict=False))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        fields = ", ".join(to_camel(n) for n in model.model_fields)
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "arguments"
        raise CommandArgumentError(
            f"{command} wants [{{{fields}}}] or the same positionally; {where}: {first['msg']}"
        ) from None


# ---- arguments ------------------------------------------------------------------------------


class UriArgs(WireModel):
    uri: str


class ProfileArgs(WireModel):
    uri: str
    full: bool = False


class ShowProfileArgs(WireModel):
    uri: str | None = None
    report: str = Field(validation_alias=AliasChoices("report", "reportPath"))
    map: dict[str, str] = Field(default_factory=dict)
    side: Literal["candidate", "reference"] = Field(
        "candidate", description="reference: a report of the reference's Model, for `uri`'s panel."
    )


# ---- results --------------------------------------------------------------------------------


class CommandResult(WireModel):
    ok: bool
    message: str = ""
    state: str | None = None


class VerifyCommandResult(CommandResult):
    status: str | None = None
    title: str | None = None
    compile_only: bool = False
    cached: bool = False
    reference: str | None = None
    device: str | None = None
    """Where it ran: `cuda:K`, or a cluster node and its GPU (`10.0.0.5/gpu3`)."""
    speedup_vs_eager: float | None = None
    speedup_vs_compile: float | None = None
    diagnostics: int = 0
    wall_seconds: float = 0.0
    sandbox: str = ""
    """'bwrap' when the code ran confined; otherwise why not."""


class ProfileCommandResult(CommandResult):
    report: str | None = None
    documents: list[str] = Field(default_factory=list)
    diagnostics: int = 0
    kernels: list[KernelSummary] = Field(default_factory=list)
    unmapped: list[str] = Field(default_factory=list)
    cached: bool = False
    wall_seconds: float = 0.0
    ncu_seconds: float = 0.0
    build_seconds: float = 0.0


class AttemptSummary(WireModel):
    index: int
    stage: str
    status: str
    speedup: float | None = None
    rubric: int | None = None
    reward: float | None = None
    phase: str = "single"
    subtask: str | None = None  # "2/5 conv+bn+relu" in a step-by-step run


class GenerateCommandResult(CommandResult):
    output: str | None = None
    verify: str | None = None
    stopped: str | None = None
    trajectories: str | None = None
    attempts: list[AttemptSummary] = Field(default_factory=list)


class OpenGeneratedResult(WireModel):
    shown: bool
