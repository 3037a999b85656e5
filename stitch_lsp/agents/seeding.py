"""The builtin generator as the seed of a step-by-step run (torch-free: it runs in its worker).

Each subtask's block becomes a subproblem file (`partial.subproblem`); the generator runs on all
of them in one worker, and what it generates whole is spliced into the block as that subtask's
first attempt. What it refuses, or would leave as PyTorch fallbacks, the LLM writes.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from pathlib import Path

from stitch_lsp.agents import partial
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import ForwardScaffold, Subtask

log = logging.getLogger(__name__)


def builtin_group_seeds(
    reference: Path,
    settings: Settings,
    scaffold: ForwardScaffold,
    subtasks: list[Subtask],
    cancel: threading.Event | None = None,
) -> dict[str, partial.GroupSeed]:
    """The builtin generator's candidate per subtask group it handles."""
    from stitch_lsp.compiler import generate_candidates

    subs = [s for st in subtasks if (s := partial.subproblem(scaffold, st, reference))]
    if not subs:
        return {}
    with tempfile.TemporaryDirectory(prefix="stitch-subproblems-") as tmp:
        paths = []
        for i, sub in enumerate(subs, 1):
            path = Path(tmp) / f"subproblem_{i}.py"
            path.write_text(sub.source, encoding="utf-8")
            paths.append(path)
        candidates = generate_candidates(
            paths, settings, cancel=cancel, readable=(Path(reference).resolve(),)
        )
    seeds: dict[str, partial.GroupSeed] = {}
    for sub, cand in zip(subs, candidates, strict=True):
        fallbacks = [op for g in cand.groups if g.kind == "aten" for op in g.ops]
        if cand.handled and cand.source and not fallbacks:
            seeds[sub.group] = partial.GroupSeed(sub, cand.source)
        elif fallbacks:  # ops it would leave in PyTorch: the LLM writes this group
            log.info("builtin generator: group %s falls back to PyTorch: %s", sub.group, fallbacks)
        else:
            log.info("builtin generator: group %s not handled: %s", sub.group, cand.reason)
    return seeds
