"""The StitchCUDA loop: Planner, then Coder and Verifier in turn, until fast enough or out of
attempts.

The Verifier's feedback (build errors with lines, the mismatch, timings, profile hints) goes
back to the Coder. The stage follows the last verdict: a build error asks for `repair_compile`,
a wrong result for `repair_correctness`, a correct one for `optimize_performance`. A replan
fires when the last two attempts failed to build, or built but were wrong, or were correct,
short of the target and within 5% of each other. The best correct attempt is kept. Every attempt
gets a rubric, a reward and a trajectory record. The loop never imports torch: analysis and
verification run in workers.

With the LLM coder, a model whose plan has two or more fusion groups is built step by step, as
in StitchCUDA: the groups become subtasks (`stitch_lsp.agents.subtasks`), and subtask k writes
group k in CUDA into the current partial program, whose later groups are still PyTorch
(`stitch_lsp.agents.partial`). Each partial program is verified against the whole reference,
and repairs stay inside the subtask, within `subtask_budget(maxAttempts)` attempts. A subtask that
never passes is reported and its group stays PyTorch: the groups after it do not depend on it
(they read the tensors the reference computes), so their work is not thrown away, and the stitch
step asks for it again. After the last subtask, the whole program is stitched (one attempt that
consolidates the groups and writes any left in PyTorch) and optimized like a one-shot run, with
`maxAttempts` attempts of its own. Only that whole-program phase, or the program at the end of
the subtasks, is ever written. The builtin generator seeds the build: its whole program, where it
handles the model, is verified first and then optimized; otherwise its code for the groups it
handles is spliced into their blocks as their subtask's first attempt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, Protocol

from stitch_lsp.agents import partial
from stitch_lsp.agents import planner as planner_mod
from stitch_lsp.agents import rubric as rubric_mod
from stitch_lsp.agents.coder import (
    Coder,
    CoderReply,
    CoderRequest,
    StitchContext,
    SubtaskContext,
    build_messages,
    format_feedback,
)
from stitch_lsp.agents.llm import ChatClient, EndpointError
from stitch_lsp.agents.subtasks import plan_subtasks, subtask_budget
from stitch_lsp.agents.trajectory import TrajectoryWriter, new_run_id, record
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import (
    Attempt,
    CoderStage,
    ForwardScaffold,
    Plan,
    ReferenceAnalysis,
    RunResult,
    Subtask,
    SubtaskOutcome,
    Verdict,
)

log = logging.getLogger(__name__)
_BUILD_FAIL = {"compile_error", "no_code"}
_WRONG = {"incorrect", "runtime_error", "exploit", "rejected", "timeout"}


class Verifier(Protocol):
    """Builds, checks and times one candidate against the reference (in a worker).

    A Verifier may also offer `profile(reference, candidate, *, cancel) -> (summary, hints)`;
    the loop calls it on the version an optimization starts from, and only then.
    """

    def __call__(
        self, reference: Path, candidate: str, *, compile_only: bool, cancel: threading.Event
    ) -> Verdict: ...


Analyzer = Callable[..., ReferenceAnalysis]
Progress = Callable[[str], None]
#: The builtin generator's code for each subtask it handles, by group (see `partial.subproblem`).
GroupSeeder = Callable[[ForwardScaffold, list[Subtask]], dict[str, partial.GroupSeed]]
Phase = Literal["single", "subtask", "stitch", "whole"]


class Cancelled(Exception):
    pass


class _Stop(Exception):
    """Ends a run early with a reason (no GPU, the endpoint, the target met)."""

    def __init__(self, stopped: str, message: str = "") -> None:
        super().__init__(message)
        self.stopped = stopped
        self.message = message


@dataclass
class LoopOptions:
    compile_only: bool = False
    profile_reference: bool = True  # time the reference on the GPU while planning
    use_judge: bool = True  # use the LLM judge when a client is given
    max_no_code: int = 2  # consecutive replies without code that end the run
    trajectories_dir: Path | None = None
    reference_label: str | None = None  # how records name the reference (a relative path)
    seed: Callable[[], str | None] | None = None  # a deterministic draft for the LLM to start from
    # The builtin program where it generates every op (no PyTorch fallback): the step-by-step
    # build starts from it. One with fallbacks leaves those ops to the LLM's subtasks instead.
    whole_seed: Callable[[], str | None] | None = None
    start_from: str | None = None  # an existing candidate to repair or optimize ("Optimize" action)
    stepwise: bool = True  # build models of 2+ fusion groups subtask by subtask (LLM coder)
    seed_groups: GroupSeeder | None = None  # the builtin generator's code per subtask


@dataclass
class _State:
    plan: Plan
    attempts: list[Attempt] = field(default_factory=list)
    replans: int = 0
    since_replan: int = 0  # attempts made under the current plan
    records: list[tuple[Attempt, CoderReply]] = field(default_factory=list)
    baseline: Attempt | None = None  # the verified `start_from` version
    outcomes: list[SubtaskOutcome] = field(default_factory=list)
    built: Attempt | None = None  # step by step: the last program a subtask got to pass
    build_done: bool = False  # every subtask has run: `built` is the program they made
    notes: list[str] = field(default_factory=list)

    def whole_programs(self) -> list[Attempt]:
        """Attempts that may be written: never a subtask's step, except the program the subtasks
        made once they have all run."""
        last = self.built if self.build_done else None
        return [a for a in self.attempts if a.phase != "subtask" or a is last]


def _sentence(message: str, more: str) -> str:
    if message.rstrip().endswith("."):
        return f"{message.rstrip()} {more[:1].upper()}{more[1:]}."
    return f"{message}; {more}"


def describe_subtasks(outcomes: list[SubtaskOutcome]) -> str:
    """'step by step: 3 subtasks, 2 done, 1 failed (linear+sigmoid left in PyTorch)'."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    words = {
        "done": "done",
        "seeded": "seeded by the builtin generator",
        "covered": "covered by the builtin generator's whole program",
        "failed": "failed",
        "stopped": "stopped by the end of the run",
        "not_reached": "not reached",
    }
    parts = [f"{counts[k]} {w}" for k, w in words.items() if counts.get(k)]
    text = f"step by step: {len(outcomes)} subtasks, " + ", ".join(parts)
    failed = [o.subtask.label for o in outcomes if o.status == "failed"]
    if failed:
        text += f" ({', '.join(failed)} left in PyTorch by the build)"
    return text


def trigger_for_replan(recent: list[Attempt], target: float) -> str | None:
    """The replan rule; `recent` holds the attempts made under the current plan."""
    if len(recent) < 2:
        return None
    a, b = recent[-2].verdict, recent[-1].verdict
    if a.status in _BUILD_FAIL and b.status in _BUILD_FAIL:
        return "the last 2 attempts failed to compile"
    if a.status in _WRONG and b.status in _WRONG:
        return "the last 2 attempts compiled but were wrong"
    correct = [x.verdict for x in recent if x.verdict.status == "passed"]
    if b.status == "passed" and len(correct) >= 2:
        s1, s2 = correct[-2].speedup, correct[-1].speedup
        if (
            s1 is not None
            and s2 is not None
            and max(s1, s2) < target
            and abs(s1 - s2) <= 0.05 * max(s1, s2)
        ):
            return (
                f"the last 2 correct attempts missed the target {target:g}x "
                f"({s1:.2f}x, {s2:.2f}x) and were within 5% of each other"
            )
    return None


class GenerationLoop:
    def __init__(
        self,
        reference: Path,
        settings: Settings,
        coder: Coder,
        verifier: Verifier,
        *,
        client: ChatClient | None = None,
        options: LoopOptions | None = None,
        analyze: Analyzer = planner_mod.analyze_reference,
        cancel: threading.Event | None = None,
        progress: Progress | None = None,
    ) -> None:
        self.reference = reference
        self.settings = settings
        self.coder = coder
        self.verifier = verifier
        self.client = client
        self.opt = options or LoopOptions()
        self.analyze = analyze
        self.cancel = cancel or threading.Event()
        self.progress = progress or (lambda _msg: None)
        self.source = reference.read_text(encoding="utf-8")
        self.label = self.opt.reference_label or reference.name
        self.run_id = new_run_id()
        self.on_attempt: Callable[[Attempt], None] | None = None
        self.target = settings.target_speedup

    # ------------------------------------------------------------------ public

    def run(self) -> RunResult:
        mode = "compile" if self.opt.compile_only else "full"
        result = RunResult(
            reference=self.label, verify_mode=mode, coder=self.coder.name, stopped="budget"
        )
        state: _State | None = None
        try:
            state = _State(plan=self._plan())
            subtasks = self._subtasks(state)
            if subtasks:
                self._stepwise(state, result, subtasks)
            else:
                self._single(state, result)
        except _Stop as stop:
            result.stopped = stop.stopped  # type: ignore[assignment]
            result.message = stop.message
        except Cancelled:
            result.stopped, result.message = "cancelled", "cancelled; nothing was written"
        except EndpointError as exc:
            if exc.kind == "cancelled":
                result.stopped, result.message = "cancelled", "cancelled; nothing was written"
            else:
                result.stopped, result.message = "endpoint", str(exc)
        except planner_mod.PlannerError as exc:
            cancelled = self.cancel.is_set()
            result.stopped = "cancelled" if cancelled else "error"
            result.message = "cancelled; nothing was written" if cancelled else str(exc)
        except Exception as exc:  # a bug or a broken worker: end the run, keep what was learnt
            log.exception("the generation loop failed")
            result.stopped, result.message = "error", f"{type(exc).__name__}: {exc}"
        finally:
            if state is not None:
                result.attempts = state.attempts
                result.replans = state.replans
                result.subtasks = state.outcomes
                result.notes = state.notes
                self._choose_best(result, state)
                result.trajectory_file = self._write_trajectories(state, result)
        self._finish_message(result)
        return result

    # ------------------------------------------------------------------ steps

    def _check(self) -> None:
        if self.cancel.is_set():
            raise Cancelled

    def _plan(self) -> Plan:
        self.progress("Planning")
        try:
            analysis = self.analyze(
                self.reference,
                self.settings,
                profile=self.opt.profile_reference and not self.opt.compile_only,
                cancel=self.cancel,
            )
        except planner_mod.PlannerError as exc:
            if "No module named 'torch'" not in str(exc):
                raise
            # no torch for workers: the graph analysis is lost, but a compile-only loop still
            # works (the Verifier builds fastcuda sources without torch)
            analysis = planner_mod.fallback_analysis("torch is not installed for the workers")
        self._check()
        plan = planner_mod.plan_from_analysis(analysis)
        if self.client is not None and self.coder.iterative:
            plan, _, _ = planner_mod.llm_plan(self.client, plan, self.label, self.source)
        self._check()
        return plan

    def _single(self, state: _State, result: RunResult) -> None:
        """The one-shot run: draft (or the `start_from` version), then repair and optimize."""
        stage = CoderStage.draft
        previous: Attempt | None = None
        if self.opt.start_from is not None:
            previous = state.baseline = self._verify_baseline(state)
            if previous.verdict.status in {"no_gpu", "compiled"}:
                result.stopped = "no_gpu" if previous.verdict.status == "no_gpu" else "error"
                result.message = (
                    previous.verdict.message
                    if previous.verdict.status == "no_gpu"
                    else "optimizing needs a GPU: without one, speed cannot be measured"
                )
                return
            stage, _ = self._next_stage(state, previous)
            if stage is CoderStage.optimize_performance:
                # asked to optimize: beat the current version, not just the configured target
                self.target = max(self.target, (previous.verdict.speedup or 0.0) * 1.05)
                result.baseline_speedup = previous.verdict.speedup
                self._profile(previous)
        seed = self.opt.seed() if (self.opt.seed and self.coder.iterative) else None
        self._attempts(state, result, stage=stage, previous=previous, seed=seed, phase="single")

    def _attempts(
        self,
        state: _State,
        result: RunResult,
        *,
        stage: CoderStage,
        previous: Attempt | None,
        phase: Phase,
        seed: str | None = None,
        stitch: StitchContext | None = None,
    ) -> None:
        """Coder and Verifier in turn for up to `maxAttempts` attempts on the whole program."""
        budget = self.settings.max_attempts
        no_code_run = 0
        for index in range(1, budget + 1):
            self._check()
            if phase == "single":
                self.progress(f"Coding attempt {index}/{budget}")
            else:
                self.progress(f"Whole program: attempt {index}/{budget}")
            started = time.monotonic()
            req = CoderRequest(
                stage=stage,
                attempt=len(state.attempts) + 1,
                reference_name=self.label,
                reference=self.source,
                plan=state.plan,
                previous=previous,
                seed=seed,
                target_speedup=self.target,
                stitch=stitch if index == 1 else None,
            )
            reply = self.coder.write(req)
            this_phase: Phase = phase if (phase != "stitch" or index == 1) else "whole"
            attempt = self._verify_attempt(state, reply, stage, previous, started, this_phase)
            verdict = attempt.verdict

            if verdict.status == "no_gpu":
                result.stopped, result.message = "no_gpu", verdict.message or "no CUDA GPU here"
                return
            if verdict.status == "passed" and (verdict.speedup or 0.0) >= self.target:
                result.stopped = "target_met"
                return
            if verdict.status == "compiled":
                result.stopped = "compiled"  # built, nothing measured: nothing more to learn
                return
            if not self.coder.iterative:
                result.stopped = "builtin_done"
                return
            if verdict.status == "no_code":
                no_code_run += 1
                if no_code_run >= self.opt.max_no_code:
                    result.stopped = "endpoint"
                    result.message = (
                        f"the model replied {no_code_run} times without a usable code block "
                        f"({verdict.message})"
                    )
                    return
            else:
                no_code_run = 0
                stage, previous = self._next_stage(state, attempt)
            if index == budget:
                break
            if stage is CoderStage.optimize_performance and previous is not None:
                self._profile(previous)
            recent = state.attempts[-state.since_replan :]
            trigger = trigger_for_replan(recent, self.target)
            if trigger is not None:
                self.progress(f"Planning (revision {state.plan.revision + 1})")
                state.plan, _, _ = planner_mod.replan(
                    state.plan,
                    state.attempts,
                    trigger,
                    client=self.client,
                    reference_name=self.label,
                    reference=self.source,
                )
                state.replans += 1
                state.since_replan = 0
                if "within 5%" not in trigger:
                    stage = CoderStage.draft
        result.stopped = "budget"

    def _verify_attempt(
        self,
        state: _State,
        reply: CoderReply,
        stage: CoderStage,
        previous: Attempt | None,
        started: float,
        phase: Phase,
        *,
        coder: str | None = None,
        subtask: SubtaskContext | None = None,
        partial_program: bool = False,
    ) -> Attempt:
        """Verify a reply's code (if any), score it and record it as the next attempt."""
        self._check()
        if reply.code is None:
            verdict = Verdict(status="no_code", message=reply.problem or "no code in the reply")
        else:
            self.progress("Verifying")
            verdict = self.verifier(
                self.reference,
                reply.code,
                compile_only=self.opt.compile_only,
                cancel=self.cancel,
            )
        self._check()
        attempt = Attempt(
            index=len(state.attempts) + 1,
            stage=stage,
            plan_revision=state.plan.revision,
            coder=coder or self.coder.name,
            code=reply.code,
            finish_reason=reply.finish_reason,
            verdict=verdict,
            phase=phase,
            partial=partial_program,
        )
        if subtask is not None:
            attempt.subtask = subtask.subtask.ref()
            attempt.subtask.attempt = subtask.attempt
            attempt.subtask.budget = subtask.budget
        self._score(attempt, state.plan, previous, subtask)
        attempt.seconds = time.monotonic() - started
        state.attempts.append(attempt)
        state.records.append((attempt, reply))
        state.since_replan += 1
        if self.on_attempt is not None:
            self.on_attempt(attempt)
        return attempt

    # ------------------------------------------------------------------ step by step

    def _subtasks(self, state: _State) -> list[Subtask]:
        if not (self.opt.stepwise and self.coder.iterative and self.opt.start_from is None):
            return []
        subtasks, note = plan_subtasks(state.plan)
        if note and subtasks:
            state.notes.append(note)
        return subtasks

    def _stepwise(self, state: _State, result: RunResult, subtasks: list[Subtask]) -> None:
        analysis = state.plan.analysis
        scaffold = analysis.scaffold if analysis is not None else None
        state.outcomes = [SubtaskOutcome(subtask=st) for st in subtasks]
        program = partial.compose(scaffold, subtasks) if scaffold is not None else None
        if scaffold is None:
            state.notes.append(
                "no flat forward from torch.fx: each subtask starts from the reference itself"
            )
        if self._builtin_whole(state, result):
            return
        seeds: dict[str, partial.GroupSeed] = {}
        if scaffold is not None and self.opt.seed_groups is not None:
            self.progress("Seeding the subtasks with the builtin generator")
            seeds = self.opt.seed_groups(scaffold, subtasks)
            self._check()
        budget = subtask_budget(self.settings.max_attempts)
        for outcome in state.outcomes:
            seed = seeds.get(outcome.subtask.group)
            program = self._subtask(state, outcome, program, budget, seed)
        self._whole_phase(state, result)

    def _builtin_whole(self, state: _State, result: RunResult) -> bool:
        """Where the builtin generator handles the whole model, its program is the start: verify
        it, and when it passes, skip the subtasks and optimize it. True when the run went on
        from it."""
        whole = self.opt.whole_seed() if self.opt.whole_seed is not None else None
        self._check()
        if not whole:
            return False
        self.progress("Verifying the builtin generator's whole program")
        reply = CoderReply(
            messages=build_messages(self._request(state, CoderStage.draft, None)),
            reply=f"The builtin generator's whole program.\n\n```python\n{whole.rstrip()}\n```\n",
            code=whole,
            finish_reason="stop",
            model="builtin",
        )
        attempt = self._verify_attempt(
            state, reply, CoderStage.draft, None, time.monotonic(), "whole", coder="builtin"
        )
        status = attempt.verdict.status
        if status == "no_gpu":
            raise _Stop("no_gpu", attempt.verdict.message or "no CUDA GPU here")
        if status not in {"passed", "compiled"}:
            state.notes.append(
                f"the builtin generator's whole program did not pass ({status}); "
                "building step by step"
            )
            return False
        for o in state.outcomes:
            o.status, o.accepted = "covered", attempt.index
            o.message = "in the builtin generator's whole program"
        state.built, state.build_done = attempt, True
        self._from_built(state, result, stitch=None)
        return True

    def _request(
        self,
        state: _State,
        stage: CoderStage,
        previous: Attempt | None,
        subtask: SubtaskContext | None = None,
    ) -> CoderRequest:
        return CoderRequest(
            stage=stage,
            attempt=len(state.attempts) + 1,
            reference_name=self.label,
            reference=self.source,
            plan=state.plan,
            previous=previous,
            target_speedup=self.target,
            subtask=subtask,
        )

    def _subtask(
        self,
        state: _State,
        outcome: SubtaskOutcome,
        program: str | None,
        budget: int,
        seed: partial.GroupSeed | None,
    ) -> str | None:
        """Subtask attempts until one passes (its program is returned) or the budget is spent
        (the group stays PyTorch: the program comes back unchanged)."""
        st = outcome.subtask
        done = [o.subtask.label for o in state.outcomes if o.status in {"done", "seeded"}]
        failed = [o.subtask.label for o in state.outcomes if o.status == "failed"]
        ctx = SubtaskContext(
            subtask=st, program=program, attempt=0, budget=budget, in_cuda=done, in_pytorch=failed
        )
        is_partial = st.index < st.total or bool(failed)
        outcome.status = "stopped"  # until it ends one way or the other
        stage = CoderStage.draft
        previous: Attempt | None = None
        no_code_run = 0
        for k in range(1, budget + 1):
            self._check()
            ctx.attempt = k
            self.progress(f"{st.title}, attempt {k}/{budget}")
            started = time.monotonic()
            spliced = None
            if k == 1 and seed is not None and program is not None:
                spliced = partial.splice(program, st, seed.candidate, seed.sub)
            ctx.seed = seed.candidate if (seed is not None and spliced is None) else None
            if ctx.seed is None:
                ctx.seed_feedback = None
            req = self._request(state, stage, previous, ctx)
            if spliced is not None:
                reply = CoderReply(
                    messages=build_messages(req),
                    reply=(
                        f"The builtin generator's kernels for group {st.group}, spliced into "
                        f"its block.\n\n```python\n{spliced.rstrip()}\n```\n"
                    ),
                    code=spliced,
                    finish_reason="stop",
                    model="builtin",
                )
            else:
                reply = self.coder.write(req)
            attempt = self._verify_attempt(
                state,
                reply,
                stage,
                previous,
                started,
                "subtask",
                coder="builtin" if spliced is not None else None,
                subtask=ctx,
                partial_program=is_partial,
            )
            outcome.attempts.append(attempt.index)
            status = attempt.verdict.status
            if status == "no_gpu":
                raise _Stop("no_gpu", attempt.verdict.message or "no CUDA GPU here")
            if status in {"passed", "compiled"}:
                outcome.status = "seeded" if spliced is not None else "done"
                outcome.accepted = attempt.index
                state.built = attempt
                return attempt.code
            if status == "no_code":
                no_code_run += 1
                if no_code_run >= self.opt.max_no_code:
                    raise _Stop(
                        "endpoint",
                        f"the model replied {no_code_run} times without a usable code block "
                        f"({attempt.verdict.message})",
                    )
                continue
            no_code_run = 0
            if spliced is not None and seed is not None:
                # the generator's code did not pass as it was: the Coder writes the group from
                # the current program, with that code and what went wrong in front of it
                ctx.seed_feedback = format_feedback(attempt.verdict)
                stage, previous = CoderStage.draft, None
                continue
            stage, previous = self._next_stage(state, attempt)
        last = state.attempts[-1].verdict if outcome.attempts else None
        outcome.status = "failed"
        why = f" (last: {last.status})" if last is not None else ""
        outcome.message = f"no correct version in {budget} attempt(s){why}"
        return program

    def _whole_phase(self, state: _State, result: RunResult) -> None:
        """After the subtasks: stitch the built program, then optimize it; draft the whole
        program in one piece if no subtask passed."""
        state.since_replan = 0
        state.build_done = True
        if state.built is None:
            state.notes.append(
                "no subtask reached a correct version; the whole program is drafted in one piece"
            )
            self._attempts(state, result, stage=CoderStage.draft, previous=None, phase="whole")
            return
        in_cuda = [o.subtask.label for o in state.outcomes if o.status in {"done", "seeded"}]
        in_pytorch = [o.subtask.label for o in state.outcomes if o.status == "failed"]
        self._from_built(state, result, stitch=StitchContext(in_cuda, in_pytorch))

    def _from_built(
        self, state: _State, result: RunResult, *, stitch: StitchContext | None
    ) -> None:
        built = state.built
        assert built is not None
        v = built.verdict
        if v.status == "compiled":
            raise _Stop("compiled")  # built, nothing measured: nothing more to learn
        left = stitch is not None and bool(stitch.in_pytorch)
        if (v.speedup or 0.0) >= self.target and not left:
            raise _Stop("target_met")
        self._profile(built)
        phase: Phase = "stitch" if stitch is not None else "whole"
        self._attempts(
            state,
            result,
            stage=CoderStage.optimize_performance,
            previous=built,
            phase=phase,
            stitch=stitch,
        )

    def _profile(self, attempt: Attempt) -> None:
        """Profile the version the next optimization starts from (once), if the Verifier can."""
        profile = getattr(self.verifier, "profile", None)
        v = attempt.verdict
        if profile is None or attempt.code is None or v.profile_summary or v.profile_hints:
            return
        self._check()
        self.progress("Profiling")
        v.profile_summary, v.profile_hints = profile(
            self.reference, attempt.code, cancel=self.cancel
        )
        self._check()

    def _verify_baseline(self, state: _State) -> Attempt:
        self.progress("Verifying the current version")
        code = self.opt.start_from or ""
        verdict = self.verifier(
            self.reference, code, compile_only=self.opt.compile_only, cancel=self.cancel
        )
        self._check()
        return Attempt(index=0, stage=CoderStage.draft, coder="user", code=code, verdict=verdict)

    def _next_stage(self, state: _State, attempt: Attempt) -> tuple[CoderStage, Attempt]:
        status = attempt.verdict.status
        if status == "compile_error":
            return CoderStage.repair_compile, attempt
        if status == "passed":
            pool = [a for a in state.whole_programs() if a.verdict.status == "passed"]
            if state.baseline is not None and state.baseline.verdict.status == "passed":
                pool.append(state.baseline)
            best = max(pool or [attempt], key=lambda a: a.verdict.speedup or 0.0)
            return CoderStage.optimize_performance, best
        return CoderStage.repair_correctness, attempt

    def _score(
        self,
        attempt: Attempt,
        plan: Plan,
        previous: Attempt | None,
        step: SubtaskContext | None = None,
    ) -> None:
        partial_groups = None
        if step is not None and attempt.partial:
            partial_groups = (len(step.in_cuda) + 1, step.subtask.total)
        rub = rubric_mod.score_rules(
            attempt.code,
            attempt.verdict,
            attempt.stage,
            plan,
            previous,
            partial_groups=partial_groups,
            step_base=step.program if step is not None else None,
        )
        if self.client is not None and self.opt.use_judge and attempt.code:
            self.progress("Scoring")
            feedback = format_feedback(previous.verdict) if previous else ""
            note = ""
            if step is not None:
                note = f"{step.subtask.title} of a step-by-step build"
                if attempt.partial:
                    note += "; a partial program: later groups stay PyTorch by design"
            rub = rubric_mod.judge(
                self.client,
                rub,
                code=attempt.code,
                reference=self.source,
                plan=plan,
                stage=attempt.stage,
                feedback=feedback,
                verdict=attempt.verdict,
                note=note,
            )
        attempt.rubric = rub
        attempt.rubric_total = rub.total
        attempt.reward = rubric_mod.reward(rub, attempt.verdict, attempt.stage)

    # ------------------------------------------------------------------ results

    def _choose_best(self, result: RunResult, state: _State) -> None:
        if result.stopped == "cancelled":
            return
        baseline = state.baseline
        candidates = state.whole_programs()
        passed = [a for a in candidates if a.verdict.status == "passed"]
        if baseline is not None and baseline.verdict.status == "passed":
            floor = baseline.verdict.speedup or 0.0
            passed = [a for a in passed if (a.verdict.speedup or 0.0) > floor]
        compiled = [a for a in candidates if a.verdict.status == "compiled"]
        best: Attempt | None = None
        if passed:
            best = max(passed, key=lambda a: (a.verdict.speedup or 0.0, -a.index))
        elif compiled:
            best = compiled[0]
        if best is not None:
            best.accepted = True
            result.best_index = best.index

    def _finish_message(self, result: RunResult) -> None:
        best = result.best
        n = len(result.attempts)
        if result.stopped in {"cancelled", "error", "endpoint", "no_gpu"} and best is None:
            if not result.message:
                result.message = result.stopped
            if result.stopped != "cancelled":
                made = f"{n} attempt(s) made; " if n else ""
                result.message += f" ({made}nothing was written)"
                if result.subtasks:
                    result.message = _sentence(result.message, describe_subtasks(result.subtasks))
            return
        if best is None and result.baseline_speedup is not None:
            result.message = (
                f"no attempt beat the current version ({result.baseline_speedup:.2f}x) after "
                f"{n} attempt(s); nothing was written"
            )
            return
        if best is None:
            last = result.attempts[-1].verdict if result.attempts else None
            why = f"; last: {last.status} {last.message}".rstrip() if last else ""
            result.message = (
                f"no attempt was accepted after {n} attempt(s){why}; nothing was written"
            )
            return
        rub = f"rubric {best.rubric_total}/20" if best.rubric_total is not None else "no rubric"
        if best.verdict.status == "compiled":
            result.message = (
                f"attempt {best.index} compiled and passed the static checks ({rub}). "
                "Correctness and speed were NOT verified: compile-only verification, no GPU."
            )
        else:
            target = self.target
            met = "met" if (best.verdict.speedup or 0) >= target else "missed"
            result.message = (
                f"attempt {best.index}/{n} is correct, speedup {best.verdict.speedup or 0:.2f}x "
                f"over eager (target {target:.2f}x {met}), {rub}, reward {best.reward:.3f}"
            )
        if result.stopped == "endpoint" and result.message:
            result.message += "; the run ended early: endpoint failure"
        if result.subtasks and result.message:
            result.message = _sentence(result.message, describe_subtasks(result.subtasks))

    def _write_trajectories(self, state: _State, result: RunResult) -> str | None:
        if self.opt.trajectories_dir is None or not state.records:
            return None
        writer = TrajectoryWriter(self.opt.trajectories_dir, self.run_id)
        for attempt, reply in state.records:
            writer.write(
                record(
                    attempt,
                    run_id=self.run_id,
                    messages=reply.messages,
                    reply=reply.reply,
                    reference=self.label,
                    model=reply.model,
                    verify_mode=result.verify_mode,
                    usage=reply.usage,
                )
            )
        return str(writer.path)
