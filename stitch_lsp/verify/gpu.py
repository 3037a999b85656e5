"""The GPU part of a verify run: correctness trials, exploit checks, timing (imports torch)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from stitch_lsp.models.verify import (
    CorrectnessReport,
    ExploitFinding,
    TimingReport,
    TrialResult,
    VerifyStatus,
)
from stitch_lsp.verify import exploits
from stitch_lsp.verify.correctness import (
    clone_all,
    compare,
    flatten,
    poison_allocator,
    same_values,
    tf32,
    to_device,
    tolerance,
)
from stitch_lsp.verify.timing import L2Flusher, copy_bandwidth, stats, time_cuda

if TYPE_CHECKING:
    from stitch_lsp.verify.worker import Worker


class GpuRun:
    def __init__(self, worker: Worker, torch_mod: Any, device: torch.device, ref: Any, cand: Any):
        self.w = worker
        self.req = worker.req
        self.device = device
        self.ref_mod = ref
        self.cand_mod = cand
        self._inputs_on_device = True

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
            w.phase("correctness")
            report, first_outs = self.correctness(ref_model, cand_model)
            w.result.correctness = report
            w.result.build = w.watch.summary()  # lazy (first-forward) builds are known now
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
            w.phase("timing")
            timing = self.timing(ref_model, cand_model)
            w.result.timing = timing
            if req.exploit_checks and timing.candidate and timing.floor_ms:
                eager = timing.eager.median if timing.eager else None
                found += exploits.check_floor(timing.candidate.median, eager, timing.floor_ms)
            if timing.candidate and timing.eager:
                w.result.speedup_vs_eager = timing.eager.median / timing.candidate.median
            if timing.candidate and timing.compiled:
                w.result.speedup_vs_compile = timing.compiled.median / timing.candidate.median
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
                if not res.passed or k == len(ref_outs) - 1:
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
        a = self.inputs(self.req.seed + 1000)
        b = self.inputs(self.req.seed + 1001)
        found += exploits.check_reuse_and_caching(ref_model, cand_model, a, b, atol, rtol)
        torch.cuda.synchronize(self.device)
        found += exploits.check_stream(cand_model, self.inputs(self.req.seed + 1002))
        if not self.req.allow_tf32 and first:
            found += exploits.check_downcast(
                ref_model, first["cand_outs"], first["ref_outs"], first["originals"]
            )
        first.clear()
        torch.cuda.synchronize(self.device)
        torch.cuda.empty_cache()
        return found

    # ------------------------------------------------------------------ timing

    def timing(self, ref_model: Any, cand_model: Any) -> TimingReport:
        req = self.req
        report = TimingReport()
        sets = [self.inputs(req.seed + 2000 + i) for i in range(req.input_sets)]
        flush = L2Flusher(self.device)
        kw = {"trials": req.timing_trials, "warmup": req.warmup, "flush": flush}
        report.eager = stats(time_cuda(ref_model, sets, **kw))
        if req.compare_compile:
            try:
                compiled = torch.compile(ref_model)
                report.compiled = stats(time_cuda(compiled, sets, **kw))
            except Exception as exc:  # no triton, unsupported op, ...
                report.compile_note = f"torch.compile failed: {type(exc).__name__}: {exc}"[:500]
        else:
            report.compile_note = "not requested"
        report.candidate = stats(time_cuda(cand_model, sets, **kw))
        try:
            with torch.no_grad():
                outs = flatten(ref_model(*sets[0]))
            nbytes = exploits.tensor_bytes(sets[0]) + exploits.tensor_bytes(outs)
            flops = exploits.count_flops(ref_model, sets[0])
            first = next((o for o in outs if isinstance(o, torch.Tensor)), None)
            dt = first.dtype if first is not None else torch.float32
            peak = exploits.peak_flops(dt, req.allow_tf32, self.device)
            bw = copy_bandwidth(self.device)
            report.bytes_moved = nbytes
            report.flops = flops
            report.floor_ms = exploits.roofline_floor_ms(nbytes, flops, bw * 1.05, peak)
        except torch.cuda.OutOfMemoryError:
            report.floor_ms = None
        return report
