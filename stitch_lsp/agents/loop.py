"""The StitchCUDA loop: Planner, then Coder and Verifier in turn, until fast enough or out of
attempts.

The Verifier's feedback (build errors with lines, the mismatch, timings, profile hints) goes
back to the Coder. The stage follows the last verdict: a build error asks for `repair_compile`,
a wrong result for `repair_correctness`, a correct one for `optimize_performance`. A replan
fires when the last two attempts failed to build, or built but were wrong, or were correct,
short of the target and within 5% of each other. The best correct attempt is kept. Every attempt
gets a rubric, a reward and a trajectory record. The loop never imports torch: analysis and
verification run in workers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from stitch_lsp.agents import planner as planner_mod
from stitch_lsp.agents import rubric as rubric_mod
from stitch_lsp.agents.coder import Coder, CoderReply, CoderRequest, format_feedback
from stitch_lsp.agents.llm import ChatClient, EndpointError
from stitch_lsp.agents.trajectory import TrajectoryWriter, new_run_id, record
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import (
    Attempt,
    CoderStage,
    Plan,
    ReferenceAnalysis,
    RunResult,
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


class Cancelled(Exception):
    pass


@dataclass
class LoopOptions:
    compile_only: bool = False
    profile_reference: bool = True  # time the reference on the GPU while planning
    use_judge: bool = True  # use the LLM judge when a client is given
    max_no_code: int = 2  # consecutive replies without code that end the run
    trajectories_dir: Path | None = None
    reference_label: str | None = None  # how records name the reference (a relative path)
    seed: Callable[[], str | None] | None = None  # a deterministic draft for the LLM to start from
    start_from: str | None = None  # an existing candidate to repair or optimize ("Optimize" action)


@dataclass
class _State:
    plan: Plan
    attempts: list[Attempt] = field(default_factory=list)
    replans: int = 0
    since_replan: int = 0  # attempts made under the current plan
    records: list[tuple[Attempt, CoderReply]] = field(default_factory=list)
    baseline: Attempt | None = None  # the verified `start_from` version


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
            self._iterate(state, result)
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
                self._choose_best(result, state.baseline)
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

    def _iterate(self, state: _State, result: RunResult) -> None:
        budget = self.settings.max_attempts
        stage = CoderStage.draft
        previous: Attempt | None = None
        no_code_run = 0
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
        for index in range(1, budget + 1):
            self._check()
            self.progress(f"Coding attempt {index}/{budget}")
            started = time.monotonic()
            req = CoderRequest(
                stage=stage,
                attempt=index,
                reference_name=self.label,
                reference=self.source,
                plan=state.plan,
                previous=previous,
                seed=seed,
                target_speedup=self.target,
            )
            reply = self.coder.write(req)
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
                index=index,
                stage=stage,
                plan_revision=state.plan.revision,
                coder=self.coder.name,
                code=reply.code,
                finish_reason=reply.finish_reason,
                verdict=verdict,
            )
            self._score(attempt, state.plan, previous)
            attempt.seconds = time.monotonic() - started
            state.attempts.append(attempt)
            state.records.append((attempt, reply))
            state.since_replan += 1
            if self.on_attempt is not None:
                self.on_attempt(attempt)

            if verdict.status == "no_gpu":
                result.stopped, result.message = "no_gpu", verdict.message or "no CUDA GPU here"
                return
            if verdict.status == "passed" and (verdict.speedup or 0.0) >= self.target:
                result.stopped = "target_met"
                return
            if verdict.status == "compiled":
                result.stopped = "target_met"  # nothing more can be learnt without a GPU
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
            pool = [a for a in state.attempts if a.verdict.status == "passed"]
            if state.baseline is not None and state.baseline.verdict.status == "passed":
                pool.append(state.baseline)
            best = max(pool or [attempt], key=lambda a: a.verdict.speedup or 0.0)
            return CoderStage.optimize_performance, best
        return CoderStage.repair_correctness, attempt

    def _score(self, attempt: Attempt, plan: Plan, previous: Attempt | None) -> None:
        rub = rubric_mod.score_rules(attempt.code, attempt.verdict, attempt.stage, plan, previous)
        if self.client is not None and self.opt.use_judge and attempt.code:
            self.progress("Scoring")
            feedback = format_feedback(previous.verdict) if previous else ""
            rub = rubric_mod.judge(
                self.client,
                rub,
                code=attempt.code,
                reference=self.source,
                plan=plan,
                stage=attempt.stage,
                feedback=feedback,
                verdict=attempt.verdict,
            )
        attempt.rubric = rub
        attempt.rubric_total = rub.total
        attempt.reward = rubric_mod.reward(rub, attempt.verdict, attempt.stage)

    # ------------------------------------------------------------------ results

    def _choose_best(self, result: RunResult, baseline: Attempt | None) -> None:
        if result.stopped == "cancelled":
            return
        passed = [a for a in result.attempts if a.verdict.status == "passed"]
        if baseline is not None and baseline.verdict.status == "passed":
            floor = baseline.verdict.speedup or 0.0
            passed = [a for a in passed if (a.verdict.speedup or 0.0) > floor]
        compiled = [a for a in result.attempts if a.verdict.status == "compiled"]
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
                f"attempt {best.index}/{n} compiled and passed the static checks ({rub}). "
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
