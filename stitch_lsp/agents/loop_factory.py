"""Builds a `GenerationLoop` from Settings: which Coder, which Verifier, the client, the folders.

The CLI (`stitch-lsp generate`) and the editor feature call this, so both run the same loop.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from stitch_lsp.agents.coder import BuiltinCoder, BuiltinDraft, Coder, LLMCoder
from stitch_lsp.agents.llm import ChatClient
from stitch_lsp.agents.loop import GenerationLoop, LoopOptions, Progress, Verifier
from stitch_lsp.agents.partial import GroupSeed
from stitch_lsp.agents.seeding import builtin_group_seeds
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import ForwardScaffold, Subtask

log = logging.getLogger(__name__)


def coder_kind(settings: Settings) -> str:
    """`auto` means the LLM when an endpoint is configured, else the builtin generator."""
    if settings.coder == "auto":
        return "llm" if settings.llm_base_url else "builtin"
    return settings.coder


def builtin_draft(
    reference: Path, settings: Settings, cancel: threading.Event | None = None
) -> BuiltinDraft:
    """Run the builtin generator (it runs its own torch worker) on `reference`."""
    from stitch_lsp.compiler import generate_candidate

    cand = generate_candidate(reference, settings, cancel=cancel)
    reason = cand.reason
    if cand.handled and not reason:
        groups = getattr(cand, "groups", []) or []
        names = ", ".join(f"{g.name} ({g.kind}: {' + '.join(g.ops)})" for g in groups)
        reason = f"Builtin generator: {len(groups)} fused group(s): {names}" if groups else ""
    fallbacks = tuple(op for g in cand.groups if g.kind == "aten" for op in g.ops)
    return BuiltinDraft(cand.handled, cand.source, reason, fallbacks)


def trajectories_folder(settings: Settings, root: Path) -> Path:
    folder = Path(settings.trajectories_dir).expanduser()
    return folder if folder.is_absolute() else root / folder


def build_loop(
    reference: Path,
    settings: Settings,
    *,
    compile_only: bool,
    root: Path | None = None,
    reference_label: str | None = None,
    cancel: threading.Event | None = None,
    progress: Progress | None = None,
    verifier: Verifier | None = None,
    device: str | None = None,
    seed_with_builtin: bool = True,
    trajectories: Path | None = None,
    stepwise: bool = True,
) -> GenerationLoop:
    """The loop for `reference`; `root` is where relative trajectory folders start, unless
    `trajectories` names the folder itself (the server checks it first)."""
    cancel = cancel or threading.Event()
    kind = coder_kind(settings)
    client: ChatClient | None = None
    coder: Coder
    seed = whole_seed = None
    seed_groups = None
    if kind == "llm":
        client = ChatClient(settings, cancel=cancel)
        coder = LLMCoder(client)
        if seed_with_builtin:
            drafts: list[BuiltinDraft | None] = []

            def draft() -> BuiltinDraft | None:
                if not drafts:  # one builtin run serves both seeds
                    try:
                        drafts.append(builtin_draft(reference, settings, cancel))
                    except Exception:  # the seed is optional: the LLM drafts from the plan alone
                        drafts.append(None)
                return drafts[0]

            def seed() -> str | None:
                d = draft()
                return d.source if d is not None and d.handled else None

            def whole_seed() -> str | None:
                d = draft()
                return d.source if d is not None and d.handled and not d.fallbacks else None

            def seed_groups(
                scaffold: ForwardScaffold, subtasks: list[Subtask]
            ) -> dict[str, GroupSeed]:
                try:
                    return builtin_group_seeds(reference, settings, scaffold, subtasks, cancel)
                except Exception:  # optional as well: the LLM writes every group
                    log.exception("seeding the subtasks with the builtin generator failed")
                    return {}

    else:
        coder = BuiltinCoder(lambda: builtin_draft(reference, settings, cancel))
    if verifier is None:
        from stitch_lsp.agents.verifier import StitchVerifier

        verifier = StitchVerifier(settings, device=device, llm_code=kind == "llm")
    options = LoopOptions(
        compile_only=compile_only,
        trajectories_dir=trajectories or trajectories_folder(settings, root or reference.parent),
        reference_label=reference_label,
        seed=seed,
        whole_seed=whole_seed,
        seed_groups=seed_groups,
        stepwise=stepwise,
    )
    return GenerationLoop(
        reference,
        settings,
        coder,
        verifier,
        client=client,
        options=options,
        cancel=cancel,
        progress=progress,
    )
