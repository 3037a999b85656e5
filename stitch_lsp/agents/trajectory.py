"""Trajectory records: one JSON line per attempt, in a shape RL fine-tuning tools read directly.

Schema `stitch-lsp.trajectory/1` (one object per line, file `<trajectories_dir>/<run_id>.jsonl`):

    schema         "stitch-lsp.trajectory/1"
    run_id         the run (one file per run)
    attempt        1-based attempt number within the run
    stage          draft | repair_compile | repair_correctness | optimize_performance
    messages       OpenAI chat format: the system and user prompt, then {"role": "assistant",
                   "content": <the reply>} appended, so SFT/RL tools take it as a conversation
    reply          the raw reply text (also the last message's content)
    finish_reason  as the endpoint reported it ("stop", ...); "builtin" coder replies say "stop"
    code           the candidate file extracted from the reply, or null
    verify         the Verifier's verdict: status, message, diagnostics, correctness, timings,
                   speedup, profile hints
    profile        {"summary": str|null, "hints": [str]} from the profiler, when it ran
    rubric         {"anti_hacking"|"engineering"|"coverage"|"compliance":
                   {"score": 1-5, "reasons": [...]}, "total": 4-20,
                   "judge": "rules"|"rules+llm", "major_hack": bool}
    reward         the StitchCUDA reward (0 to 3), or null when correctness was not checked
                   (compile-only runs on machines without a GPU)
    correct        true/false from the GPU check, null when not checked
    metadata       {"reference", "coder", "model", "plan_revision", "verify_mode", "accepted",
                   "created", "seconds", "usage"}

Added later, same schema (readers that ignore unknown keys are unaffected):

    phase          single (a one-shot run) | subtask (one step of a step-by-step build) |
                   stitch (the first whole-program attempt after the subtasks) | whole (the
                   optimizations after it)
    subtask        {"index", "total", "group", "label", "ops", "attempt", "budget"} for a
                   subtask's attempt, else null
    partial        true when the program leaves planned groups in PyTorch (a step of the build)

`stitch-lsp export-trajectories` concatenates these files, filtered by reward or correctness.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from stitch_lsp.models.agents import Attempt

SCHEMA = "stitch-lsp.trajectory/1"
# The longest text field written (characters); a longer one keeps its start and a marker.
MAX_FIELD_CHARS = 256 * 1024


def bounded(value: Any, limit: int = MAX_FIELD_CHARS) -> Any:
    """`value` with every string longer than `limit` cut to `limit` characters plus a marker that
    says how much was cut, so no field (a reply, a prompt, a log) can make a record huge."""
    if isinstance(value, str):
        if len(value) <= limit:
            return value
        cut = len(value) - limit
        return f"{value[:limit]}\n[stitch-lsp: {cut:,} of {len(value):,} characters cut]"
    if isinstance(value, dict):
        return {k: bounded(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bounded(v, limit) for v in value]
    return value


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:8]


def record(
    attempt: Attempt,
    *,
    run_id: str,
    messages: list[dict[str, str]],
    reply: str,
    reference: str,
    model: str | None,
    verify_mode: str,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    v = attempt.verdict
    rubric = None
    if attempt.rubric is not None:
        rubric = attempt.rubric.model_dump(mode="json")
        rubric["total"] = attempt.rubric.total
    return {
        "schema": SCHEMA,
        "run_id": run_id,
        "attempt": attempt.index,
        "stage": attempt.stage.value,
        "messages": [*messages, {"role": "assistant", "content": reply}],
        "reply": reply,
        "finish_reason": attempt.finish_reason,
        "code": attempt.code,
        "verify": v.model_dump(mode="json", exclude={"profile_hints", "profile_summary"}),
        "profile": {"summary": v.profile_summary, "hints": v.profile_hints}
        if (v.profile_summary or v.profile_hints)
        else None,
        "rubric": rubric,
        "reward": attempt.reward,
        "correct": v.correct,
        "phase": attempt.phase,
        "subtask": attempt.subtask.model_dump(mode="json") if attempt.subtask else None,
        "partial": attempt.partial,
        "metadata": {
            "reference": reference,
            "coder": attempt.coder,
            "model": model,
            "plan_revision": attempt.plan_revision,
            "verify_mode": verify_mode,
            "accepted": attempt.accepted,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "seconds": round(attempt.seconds, 3),
            "usage": usage or {},
        },
    }


class TrajectoryWriter:
    """Appends records to `<folder>/<run_id>.jsonl`; creates the folder on the first record.
    Text fields are cut at MAX_FIELD_CHARS characters, with a marker (see `bounded`).

    The file is created new (O_EXCL) and never opened through a symlink (O_NOFOLLOW): a link
    planted under the run's name cannot send the records, or an append, to another file."""

    def __init__(self, folder: Path, run_id: str) -> None:
        self.path = folder / f"{run_id}.jsonl"
        self._created = False

    def write(self, rec: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        flags = (
            os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        )
        if not self._created:
            flags |= os.O_CREAT | os.O_EXCL
        try:
            fd = os.open(self.path, flags, 0o644)
        except FileExistsError:
            raise FileExistsError(
                f"{self.path} already exists; the trajectory of this run was not written over it"
            ) from None
        except OSError as exc:
            raise OSError(
                exc.errno, f"cannot write the trajectory {self.path}: {exc.strerror}"
            ) from None
        self._created = True
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(bounded(rec), ensure_ascii=False) + "\n")


def iter_records(
    folder: Path, skipped: list[str] | None = None
) -> Iterator[tuple[Path, dict[str, Any]]]:
    """Every record under `folder` (recursively), skipping lines that are not our schema.

    Lines that are not UTF-8 or not JSON, and files that cannot be read (a FIFO named *.jsonl,
    no permission), are skipped; `skipped`, when given, collects a note for each."""
    from stitch_lsp.files import display_path, open_regular

    notes = skipped if skipped is not None else []
    for path in sorted(folder.rglob("*.jsonl")):
        try:
            fh = open_regular(path)
        except OSError as exc:
            notes.append(f"{display_path(path)}: {exc.strerror or exc}")
            continue
        with fh:
            for number, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8").strip()
                    rec = json.loads(line) if line else None
                except (UnicodeDecodeError, ValueError, RecursionError):
                    notes.append(f"{display_path(path)}:{number}: not UTF-8 JSON")
                    continue
                if isinstance(rec, dict) and rec.get("schema") == SCHEMA:
                    yield path, rec


def select(
    records: Iterable[dict[str, Any]],
    *,
    min_reward: float | None = None,
    only_correct: bool = False,
) -> Iterator[dict[str, Any]]:
    for rec in records:
        if only_correct and rec.get("correct") is not True:
            continue
        if min_reward is not None:
            r = rec.get("reward")
            if r is None or r < min_reward:
                continue
        yield rec
