"""The GPU part of a verify run: correctness, exploit checks, timeline, timing (imports torch)."""

from __future__ import annotations

import gc
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from stitch_lsp.models.findings import Severity
from stitch_lsp.models.verify import (
    Attribution,
    CorrectnessReport,
    ExploitFinding,
    PrecisionReport,
    TimelineReport,
    TimingReport,
    TrialResult,
    VerifyStatus,
)
from stitch_lsp.verify import attribution
from stitch_lsp.verify.baselines import apply_speedups
from stitch_lsp.verify.timeline import Call, RecordingError, summarise
from stitch_lsp.verify.worker import activity, exploits, harness, optrace, precision
from stitch_lsp.verify.worker.algebra_floor import algebra_floor
from stitch_lsp.verify.worker.correctness import (
    clone_all,
    compare,
    flatten,
    poison_allocator,
    same_values,
    tf32,
    to_device,
    tolerance,
)
from stitch_lsp.verify.worker.timing import (
    GraphReplay,
    L2Flusher,
    copy_bandwidth,
    stats,
    tf32_on,
    time_cuda,
)

if TYPE_CHECKING:
    from stitch_lsp.verify.worker.main import Worker

TIMELINE_FORWARDS = 3


class GpuRun:
    def __init__(self, worker: Worker, torch_mod: Any, device: torch.device, ref: Any, cand: Any):
        self.w = worker
        self.req = worker.req
        self.device = device
        self.ref_mod = ref
        self.cand_mod = cand
        self._inputs_on_device = True
        self._model64: tuple[torch.dtype, torch.nn.Module] | None = None
        self._model64_errors: dict[torch.dtype, str] = {}
        self._trace: optrace.ReferenceTrace | None = None
        self.late: list[ExploitFinding] = []  # found while timing

    def patched(self, when: str) -> list[ExploitFinding]:
        """The harness-patch check against the snapshot taken before any import."""
        before = self.w.harness
        return exploits.check_harness(harness.patched(before), when) if before else []

    def reference_trace(self, ref_model: Any) -> optrace.ReferenceTrace:
        """The reference's operators and FLOPs, from one forward (made once)."""
        if self._trace is None:
            inputs = self.inputs(self.req.seed + 2000)
            self._trace = optrace.trace(ref_model, inputs)
            del inputs
            torch.cuda.synchronize(self.device)
        return self._trace

    def inputs(self, seed: int) -> list[Any]:
        """Fresh `get_inputs()`, created on the GPU directly when the file allows it (random
        numbers for a multi-GB input take seconds on the CPU), else on the CPU and copied."""
        torch.manual_seed(seed)
        torch.cuda.manual_seed(seed)
        if self._inputs_on_device:
            try:
                with torch.device(self.device):
                    return to_device(list(self.ref_mod.get_inputs()), self.device)
            except Exception:
                self._inputs_on_device = False
                torch.manual_seed(seed)
        return to_device(list(self.ref_mod.get_inputs()), self.device)

    def model64(self, ref_model: Any, dtype: torch.dtype = torch.float64) -> torch.nn.Module | None:
        """The reference in float64 (or `dtype`: float32, the oracle of a bf16/fp16 miss when
        float64 fails), same weights, kept until drop_model64; None once it could not be made
        or run in that dtype (the reason in _model64_errors). Out of memory propagates."""
        if self._model64 is not None and self._model64[0] == dtype:
            return self._model64[1]
        if dtype in self._model64_errors:
            return None
        if self._model64 is not None:
            self.drop_model64()
        try:
            self._model64 = (dtype, precision.oracle_model(ref_model, dtype))
        except torch.cuda.OutOfMemoryError:
            raise
        except Exception as exc:
            self._model64_errors[dtype] = f"{type(exc).__name__}: {exc}"[:300]
            return None
        return self._model64[1]

    def drop_model64(self) -> None:
        self._model64 = None
        gc.collect()
        torch.cuda.empty_cache()

    def run(self) -> None:
        w, req = self.w, self.req
        for attr, mod, what in (
            ("Model", self.ref_mod, "reference"),
            ("get_inputs", self.ref_mod, "reference"),
            ("get_init_inputs", self.ref_mod, "reference"),
            ("ModelNew", self.cand_mod, "candidate"),
        ):
            if not hasattr(mod, attr):
                raise RuntimeError(f"the {what} file defines no `{attr}`")
        with tf32(req.allow_tf32):
            init = list(self.ref_mod.get_init_inputs())
            torch.manual_seed(req.seed)
            torch.cuda.manual_seed(req.seed)
            ref_model = self.ref_mod.Model(*init).to(self.device)
            torch.manual_seed(req.seed)
            torch.cuda.manual_seed(req.seed)
            cand_model = self.cand_mod.ModelNew(*init).to(self.device)
            w.result.build = w.watch.summary()
            early = self.patched("after the candidate's import and __init__")
            if early:
                self.stop(early)
                return
            w.phase("correctness")
            report, first_outs = self.correctness(ref_model, cand_model)
            w.result.correctness = report
            w.result.build = w.watch.summary()  # lazy (first-forward) builds are known now
            early = self.patched("after the correctness trials")
            if early:  # a patched comparison is not a verdict, whichever way it went
                self.stop(early)
                return
            if not report.passed:
                bad = next((t for t in report.trials if not t.passed), None)
                msg = (
                    f"trial {bad.index} output {bad.output}: {bad.message}"
                    if bad
                    else "no correctness trial completed"
                )
                w.result.diagnostics.append(w.candidate_finding("stitch.incorrect", msg))
                w.finish(VerifyStatus.incorrect, msg)
                return
            found: list[ExploitFinding] = []
            if report.inputs_mutated:
                found.append(
                    ExploitFinding(
                        code="stitch.exploit.input-mutation",
                        message="the candidate changed its inputs (the reference does not)",
                    )
                )
            if req.exploit_checks:
                w.phase("exploits")
                found += self.exploit_checks(ref_model, cand_model, first_outs)
            if req.timeline or req.exploit_checks:
                w.phase("timeline")
                found += self.timeline(ref_model, cand_model)
            w.phase("timing")
            timing = self.timing(ref_model, cand_model)
            w.result.timing = timing
            found += self.late
            side_stream = any(f.code == "stitch.exploit.side-stream" for f in found)
            # Work hidden on a side stream also beats the floor: report the cause, not the symptom.
            if req.exploit_checks and timing.candidate and timing.floor_ms and not side_stream:
                eager = timing.eager.median if timing.eager else None
                if timing.candidate.median < exploits.FLOOR_MARGIN * timing.floor_ms:
                    self.lower_floor_by_algebra(timing)
                found += exploits.check_floor(timing.candidate.median, eager, timing.floor_ms)
            apply_speedups(w.result)
            if req.extra_baselines:
                w.phase("baselines")
                self.extra_baselines(ref_model, timing)
                apply_speedups(w.result)
        self.stop(found)

    def lower_floor_by_algebra(self, timing: TimingReport) -> None:
        """The floor less the heavy-op FLOPs that exact rewrites remove (algebra_floor.py):
        a correct program that sums weights instead of running the GEMM is not an exploit."""
        if timing.flops is None or timing.bytes_moved is None or not timing.floor_bandwidth:
            return
        if not timing.floor_peak:
            return
        self.w.phase("algebra floor")
        found = algebra_floor(Path(self.req.reference))
        if found.removed_flops <= 0:
            return
        flops = max(0, timing.flops - found.removed_flops)
        timing.flops = flops
        timing.floor_algebra = found.rewrites
        timing.floor_ms = exploits.roofline_floor_ms(
            timing.bytes_moved, flops, timing.floor_bandwidth, timing.floor_peak
        )

    def stop(self, found: list[ExploitFinding]) -> None:
        """The verdict: exploit when any check failed, else passed."""
        w = self.w
        w.result.exploits = found
        for f in found:
            w.result.diagnostics.append(w.candidate_finding(f.code, f.message))
        if found:
            w.finish(VerifyStatus.exploit, f"{len(found)} exploit check(s) failed: {found[0].code}")
        else:
            w.finish(VerifyStatus.passed, "correct")

    # ------------------------------------------------------------------ correctness

    def correctness(
        self, ref_model: Any, cand_model: Any
    ) -> tuple[CorrectnessReport, dict[str, Any]]:
        req = self.req
        trials: list[TrialResult] = []
        mutated = False
        atol = rtol = 0.0
        dtype = ""
        keep: dict[str, Any] = {}
        stream = torch.cuda.current_stream(self.device)
        for t in range(req.trials):
            originals = self.inputs(req.seed + t)
            ref_in = clone_all(originals)
            with torch.no_grad():
                ref_outs = flatten(ref_model(*ref_in))
            torch.cuda.synchronize(self.device)
            cand_in = clone_all(originals)
            sizes = [o.untyped_storage().nbytes() for o in ref_outs if isinstance(o, torch.Tensor)]
            poison_allocator(self.device, sizes)
            with torch.no_grad():
                cand_outs = flatten(cand_model(*cand_in))
            # Only the current stream is waited for: work left on other streams is a race the
            # comparison below is allowed to lose.
            done = torch.cuda.Event()
            done.record(stream)
            done.synchronize()
            if t == 0:
                first = next((o for o in ref_outs if isinstance(o, torch.Tensor)), None)
                if first is not None:
                    atol = rtol = tolerance(first.dtype)
                    dtype = str(first.dtype).removeprefix("torch.")
            if len(cand_outs) != len(ref_outs):
                trials.append(
                    TrialResult(
                        index=t,
                        passed=False,
                        message=f"{len(cand_outs)} outputs, expected {len(ref_outs)}",
                    )
                )
                break
            trial_ok = True
            for k, (e, a) in enumerate(zip(ref_outs, cand_outs, strict=True)):
                tol = tolerance(e.dtype) if isinstance(e, torch.Tensor) else 0.0
                res = compare(t, k, e, a, tol, tol)
                if not res.passed:
                    self.explain_miss(res, ref_model, originals, e, a, tol)
                if not res.passed or res.fp64_cleared or k == len(ref_outs) - 1:
                    trials.append(res)
                if not res.passed:
                    trial_ok = False
                    break
            torch.cuda.synchronize(self.device)
            reference_mutates = not same_values(ref_in, originals)
            expect_in = ref_in if reference_mutates else originals
            if not same_values(cand_in, expect_in):
                mutated = True
            if t == 0:
                keep = {
                    "ref_outs": ref_outs,
                    "cand_outs": cand_outs,
                    "ref_in": ref_in,
                    "cand_in": cand_in,
                    "originals": originals,
                }
            if not trial_ok:
                break
        report = CorrectnessReport(
            passed=bool(trials) and all(t.passed for t in trials) and len(trials) >= req.trials,
            trials=trials,
            atol=atol,
            rtol=rtol,
            dtype=dtype,
            tf32=req.allow_tf32,
            inputs_mutated=mutated,
        )
        return report, keep

    def explain_miss(
        self,
        res: TrialResult,
        ref_model: Any,
        originals: list[Any],
        expected: Any,
        actual: Any,
        tol: float,
    ) -> None:
        """A tolerance miss: how far each of candidate and reference is from float64. In
        bf16/fp16 a miss no further from float64 than the reference's own is cleared; where
        the reference cannot run in float64, float32 is the oracle (and is named as such)."""
        if not (
            isinstance(expected, torch.Tensor)
            and isinstance(actual, torch.Tensor)
            and expected.is_floating_point()
            and actual.shape == expected.shape
            and res.max_abs_error is not None
        ):
            return
        for dtype in precision.oracle_dtypes(expected.dtype):
            try:
                model = self.model64(ref_model, dtype)
                if model is None:
                    continue
                exact = precision.run_in(model, originals, dtype)[res.output]
                cand = precision.error_from(exact, actual, tol, tol)
                ref = precision.error_from(exact, expected, tol, tol)
                del exact
                break
            except torch.cuda.OutOfMemoryError:  # the miss stands as it is
                return
            except Exception as exc:  # an op without a kernel in this dtype: try the next
                self._model64_errors[dtype] = f"{type(exc).__name__}: {exc}"[:300]
            finally:
                self.drop_model64()
        else:
            return
        oracle = precision.dtype_name(dtype)
        res.candidate_error_fp64, res.reference_error_fp64 = cand.max_abs, ref.max_abs
        res.oracle_dtype = oracle
        name = precision.dtype_name(expected.dtype)
        no64 = ""
        if dtype != torch.float64:
            why = self._model64_errors.get(torch.float64, "")[:160]
            no64 = f" (the reference has no float64 run: {why})"
        if (
            expected.dtype in precision.REDUCED_DTYPES
            and not res.unwritten
            and precision.within_reference_error(cand, ref)
        ):
            res.passed = True
            res.fp64_cleared = True
            res.message = precision.describe_cleared(cand, ref, name, oracle) + no64
            return
        res.message += "; " + precision.describe_miss(
            res.max_abs_error,
            cand.max_abs,
            ref.max_abs,
            oracle,
            "fp32" if expected.dtype == torch.float32 else name,
        )
        res.message += no64

    # ------------------------------------------------------------------ exploits

    def exploit_checks(
        self, ref_model: Any, cand_model: Any, first: dict[str, Any]
    ) -> list[ExploitFinding]:
        found: list[ExploitFinding] = []
        if first:
            found += exploits.check_aliasing(
                first["cand_outs"], first["ref_outs"], first["cand_in"], first["ref_in"]
            )
            found += exploits.check_constant_output(first["cand_outs"], first["ref_outs"])
        atol = rtol = self.w.result.correctness.atol if self.w.result.correctness else 1e-4
        if first:
            scale, warning, tiny = exploits.check_output_scale(
                first["ref_outs"], first["cand_outs"], atol, rtol
            )
            if self.w.result.correctness is not None:
                self.w.result.correctness.output_scale = scale
            if warning is not None:
                self.w.result.diagnostics.append(
                    self.w.candidate_finding(
                        "stitch.verify.tiny-output", warning, severity=Severity.warning
                    )
                )
            found += tiny
        a = self.inputs(self.req.seed + 1000)
        b = self.inputs(self.req.seed + 1001)
        found += exploits.check_reuse_and_caching(ref_model, cand_model, a, b, atol, rtol)
        torch.cuda.synchronize(self.device)
        del a, b
        report = self.precision_oracle(ref_model, cand_model, first)
        if self.w.result.correctness is not None:
            self.w.result.correctness.precision = report
        found += exploits.check_precision(report)
        first.clear()
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()
        return found

    def precision_oracle(
        self, ref_model: Any, cand_model: Any, first: dict[str, Any]
    ) -> PrecisionReport:
        report = PrecisionReport(factor=precision.ORACLE_FACTOR, floor=precision.ORACLE_FLOOR)
        if self.req.allow_tf32:
            report.note = "TF32 is allowed (allowTf32): the float64 oracle does not apply"
            return report
        try:
            model64 = self.model64(ref_model)
            if model64 is None:
                error = self._model64_errors.get(torch.float64)
                report.note = f"no float64 run of the reference: {error}"
                return report
            sample = (first["originals"], first["ref_outs"], first["cand_outs"]) if first else None
            return precision.oracle(
                ref_model,
                cand_model,
                model64,
                sample,
                self.inputs(self.req.seed + 1500),
                seed=self.req.seed,
                sync=lambda: torch.cuda.synchronize(self.device),
            )
        except torch.cuda.OutOfMemoryError:
            report.note = "out of memory for a float64 run of the reference: oracle skipped"
            return report
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            if "float64" in str(exc).lower() or "double" in str(exc).lower():
                report.note = f"no float64 run of the reference: {type(exc).__name__}: {exc}"[:300]
                return report
            raise
        finally:
            self.drop_model64()

    # ------------------------------------------------------------------ timeline

    def timeline(self, ref_model: Any, cand_model: Any) -> list[ExploitFinding]:
        """Device activity of a few profiled forwards of each model (not the timed runs):
        the timeline, the side-stream check on the candidate's own records, and attribution
        (own, vendor and PyTorch shares of its GPU time)."""
        report = TimelineReport()
        self.w.result.timeline = report
        inputs = self.inputs(self.req.seed + 3000)
        found: list[ExploitFinding] = []
        cand_calls: list[Call] | None = None
        try:
            cand_calls = activity.record(cand_model, clone_all(inputs), calls=TIMELINE_FORWARDS)
        except (RecordingError, RuntimeError, AttributeError) as exc:
            report.note = f"no device activity for the candidate: {exc}"[:300]
        self.w.result.attribution = self.attribute(ref_model, cand_calls, report.note)
        if self.req.exploit_checks:
            if cand_calls is not None:
                found += exploits.check_side_stream(cand_calls)
            else:  # no activity records: the host-clock check, right on an unshared GPU
                found += exploits.check_stream(cand_model, clone_all(inputs))
            verdict = attribution.judge(self.w.result.attribution)
            if verdict is not None:
                found.append(verdict)
        if not self.req.timeline:
            return found
        if cand_calls is not None:
            host = activity.host_ms(cand_model, clone_all(inputs))
            report.candidate = summarise(cand_calls, host)
        try:
            ref_calls = activity.record(ref_model, clone_all(inputs), calls=TIMELINE_FORWARDS)
            report.reference = summarise(ref_calls, activity.host_ms(ref_model, clone_all(inputs)))
        except (RecordingError, RuntimeError, AttributeError) as exc:
            report.note = (report.note or "") + f" no device activity for the reference: {exc}"
        return found

    def attribute(self, ref_model: Any, calls: list[Call] | None, why: str | None) -> Attribution:
        """Classify the candidate's kernels by who compiled them (see verify/attribution.py)."""
        trace = self.reference_trace(ref_model)
        if calls is None:
            return Attribution(
                reference_ops=attribution.compute_ops(trace.ops),
                heavy_alone=attribution.heavy_alone(trace.ops),
                note=why or "no device activity recorded",
            )
        own = attribution.kernel_names([_read(self.w.candidate_path), *self.w.watch.sources])
        found = attribution.attribute(calls, own, reference_ops=trace.ops)
        if trace.note:
            found.note = f"reference {trace.note}"
        return found

    # ------------------------------------------------------------------ timing

    def timing(self, ref_model: Any, cand_model: Any) -> TimingReport:
        req = self.req
        report = TimingReport()
        self.sets = [self.inputs(req.seed + 2000 + i) for i in range(req.input_sets)]
        self.flush = L2Flusher(self.device)
        report.tf32 = tf32_on()
        report.eager = stats(time_cuda(ref_model, self.sets, **self._kw()))
        # One timed run, picked at random (not from the seeded generators), is kept and checked.
        keep = 1 + secrets.randbelow(req.timing_trials)
        kept: list[tuple[int, Any]] = []
        report.candidate = stats(
            time_cuda(cand_model, self.sets, **self._kw(), keep_run=keep, kept=kept)
        )
        self.late += self.patched("after the timed runs")
        if req.exploit_checks and kept and not self.late:
            self.late += self.check_timed(ref_model, keep, kept[0])
        kept.clear()
        if req.compare_compile:
            compiled: Any = None
            try:
                report.tf32 |= tf32_on()
                compiled = torch.compile(ref_model)
                report.compiled = stats(time_cuda(compiled, self.sets, **self._kw()))
            except Exception as exc:  # no triton, unsupported op, ...
                report.compile_note = f"torch.compile failed: {type(exc).__name__}: {exc}"[:500]
            finally:
                compiled = None
        else:
            report.compile_note = "not requested"
        try:
            with torch.no_grad():
                outs = flatten(ref_model(*self.sets[0]))
            nbytes = exploits.tensor_bytes(self.sets[0]) + exploits.tensor_bytes(outs)
            trace = self.reference_trace(ref_model)
            # The least FLOPs any correct program does (fast convolutions do fewer than the
            # direct count); without a trace, FlopCounterMode's count.
            counted = trace.flops if trace.ops else exploits.count_flops(ref_model, self.sets[0])
            flops = trace.flops_floor if trace.ops else counted
            report.flops_direct = counted
            first = next((o for o in outs if isinstance(o, torch.Tensor)), None)
            dt = first.dtype if first is not None else torch.float32
            peak = exploits.peak_flops(dt, req.allow_tf32, self.device)
            bw, source = exploits.peak_bandwidth(self.device, lambda: copy_bandwidth(self.device))
            report.bytes_moved = nbytes
            report.flops = flops
            report.floor_peak = peak
            report.floor_bandwidth = bw
            report.floor_source = source
            report.floor_ms = exploits.roofline_floor_ms(nbytes, flops, bw, peak)
        except torch.cuda.OutOfMemoryError:
            report.floor_ms = None
        if req.extra_baselines:
            report.graph_note = report.compile_ro_note = "not reached"
        else:
            report.graph_note = report.compile_ro_note = "not requested (extra baselines off)"
        return report

    def check_timed(self, ref_model: Any, run: int, kept: tuple[int, Any]) -> list[ExploitFinding]:
        """The kept timed run's output against the reference on the same input set."""
        index, result = kept
        with torch.no_grad():
            expected = flatten(ref_model(*clone_all(self.sets[index])))
        torch.cuda.synchronize(self.device)
        found = exploits.check_timed_output(expected, flatten(result), run)
        del expected, result
        return found

    def _kw(self) -> dict[str, Any]:
        return {"trials": self.req.timing_trials, "warmup": self.req.warmup, "flush": self.flush}

    def extra_baselines(self, ref_model: Any, report: TimingReport) -> None:
        """The reference under a CUDA graph, and torch.compile reduce-overhead. Last, because a
        failed capture can leave the context unusable for what would come after."""
        report.graph_note = report.compile_ro_note = None
        report.tf32 |= tf32_on()
        graph: GraphReplay | None = None
        compiled: Any = None
        try:
            graph = GraphReplay(ref_model, self.sets[0])
            mismatch = self._replay_mismatch(ref_model, graph)
            if mismatch:
                report.graph_note = mismatch
            else:
                report.graph = stats(time_cuda(graph, self.sets, **self._kw()))
        except Exception as exc:
            report.graph_note = f"CUDA graph capture failed: {type(exc).__name__}: {exc}"[:500]
        finally:
            graph = None
            gc.collect()
            torch.cuda.empty_cache()
        try:
            torch._dynamo.reset()
            report.tf32 |= tf32_on()
            compiled = torch.compile(ref_model, mode="reduce-overhead")
            report.compiled_ro = stats(time_cuda(compiled, self.sets, **self._kw()))
        except Exception as exc:
            report.compile_ro_note = (
                f"torch.compile(mode='reduce-overhead') failed: {type(exc).__name__}: {exc}"[:500]
            )
        finally:
            compiled = None
            gc.collect()
            torch.cuda.empty_cache()

    def _replay_mismatch(self, ref_model: Any, graph: GraphReplay) -> str | None:
        """The replay must give eager's outputs on fresh inputs, in fresh storage, or its
        timing would be of something else."""
        fresh = self.inputs(self.req.seed + 2100)
        with torch.no_grad():
            expected = flatten(ref_model(*clone_all(fresh)))
            got = flatten(graph(*fresh))
            again = flatten(graph(*self.sets[1 % len(self.sets)]))
        for k, (e, a) in enumerate(zip(expected, got, strict=False)):
            if isinstance(e, torch.Tensor):
                tol = tolerance(e.dtype)
                res = compare(0, k, e, a, tol, tol)
                if not res.passed:
                    return f"CUDA graph replay differs from eager ({res.message}): not timed"
        for a, b in zip(got, again, strict=False):
            if (
                isinstance(a, torch.Tensor)
                and isinstance(b, torch.Tensor)
                and a.data_ptr() == b.data_ptr()
            ):
                return "CUDA graph replay returned the same storage twice: not timed"
        return None


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""
