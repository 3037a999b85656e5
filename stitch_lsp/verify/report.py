"""The human-readable verify report (`stitch-lsp verify` without --json)."""

from __future__ import annotations

from stitch_lsp.models.verify import PrecisionReport, TimingStats, VerifyResult
from stitch_lsp.verify import attribution
from stitch_lsp.verify.baselines import LABELS
from stitch_lsp.verify.timeline import describe, describe_top


def _fmt(s: TimingStats | None) -> str:
    if s is None:
        return "-"
    return f"{s.median:.4f} ms ± {s.std:.4f} (mean {s.mean:.4f}, min {s.min:.4f}, n={s.n})"


def render(result: VerifyResult) -> str:
    lines = [f"status: {result.status.value}" + (f" - {result.message}" if result.message else "")]
    if result.gpu_name:
        lines.append(f"device: {result.device or 'cuda:0'} ({result.gpu_name})")
    b = result.build
    if b is not None and result.status.value == "compile_error":
        lines.append(f"build: {b.kind} {b.name} failed")
    elif b is not None and b.kind != "none":
        how = "cached" if b.cached else "built"
        co = ", compile-only" if b.compile_only else ""
        lines.append(f"build: {b.kind} {b.name} {how} in {b.seconds:.2f} s{co}")
    c = result.correctness
    if c is not None:
        ok = sum(t.passed for t in c.trials)
        lines.append(
            f"correctness: {ok}/{len(c.trials)} trials passed (dtype {c.dtype or '?'}, "
            f"atol=rtol={c.atol:g}, tf32 {'on' if c.tf32 else 'off'})"
        )
        worst = max((t.max_abs_error or 0.0 for t in c.trials), default=0.0)
        if c.trials:
            lines.append(f"  max abs error {worst:.3g}")
        for t in c.trials:
            if not t.passed or t.fp64_cleared:
                lines.append(f"  trial {t.index} output {t.output}: {t.message}")
        if c.precision is not None:
            lines.extend(precision_lines(c.precision))
    timing = result.timing
    if timing is not None:
        lines.append("timing (median ± std):")
        lines.append(f"  eager          {_fmt(timing.eager)}")
        compiled = (
            _fmt(timing.compiled)
            if timing.compiled
            else f"- ({timing.compile_note or 'not timed'})"
        )
        lines.append(f"  compile        {compiled}")
        if timing.graph or timing.graph_note != "not requested (extra baselines off)":
            graph = (
                _fmt(timing.graph) if timing.graph else f"- ({timing.graph_note or 'not timed'})"
            )
            ro = (
                _fmt(timing.compiled_ro)
                if timing.compiled_ro
                else f"- ({timing.compile_ro_note or 'not timed'})"
            )
            lines.append(f"  CUDA graph     {graph}")
            lines.append(f"  compile r-o    {ro}")
        lines.append(f"  candidate      {_fmt(timing.candidate)}")
        if timing.floor_ms is not None:
            src = f" ({timing.floor_source})" if timing.floor_source else ""
            lines.append(f"  roofline floor {timing.floor_ms:.4f} ms{src}")
        if timing.tf32:
            lines.append("  note: a TF32 flag was on during timing (allowTf32)")
    if result.speedup_vs_eager is not None:
        sp = f"speedup: {result.speedup_vs_eager:.3f}x vs eager"
        for value, label in (
            (result.speedup_vs_compile, "torch.compile"),
            (result.speedup_vs_graph, "CUDA graph"),
            (result.speedup_vs_compile_ro, "reduce-overhead"),
        ):
            if value is not None:
                sp += f", {value:.3f}x vs {label}"
        lines.append(sp)
        if result.speedup_vs_best is not None and result.best_baseline:
            best = LABELS.get(result.best_baseline, result.best_baseline)
            lines.append(f"  vs the best baseline ({best}): {result.speedup_vs_best:.3f}x")
    tl = result.timeline
    if tl is not None and (tl.reference or tl.candidate):
        lines.append("timeline (per forward, torch.profiler):")
        for label, one in (("reference", tl.reference), ("candidate", tl.candidate)):
            if one is not None:
                lines.append(f"  {label:10} {describe(one)}")
                lines.extend(f"    {k}" for k in describe_top(one))
    if tl is not None and tl.note:
        lines.append(f"  timeline note: {tl.note}")
    if result.attribution is not None:
        lines.extend(attribution_lines(result))
    for e in result.exploits:
        lines.append(f"exploit {e.code}: {e.message}")
    for d in result.diagnostics:
        lines.append(f"{d.path}:{d.line}:{d.column}: {d.severity.value} [{d.code}] {d.message}")
    if result.status.value in {"runtime_error", "timeout"} and result.log_tail:
        lines.append("log tail:")
        lines.extend("  " + ln for ln in result.log_tail.strip().splitlines()[-15:])
    if result.sandbox:
        lines.append(f"sandbox: {result.sandbox}")
    lines.append(f"wall: {result.wall_seconds:.1f} s")
    return "\n".join(lines)


def attribution_lines(result: VerifyResult) -> list[str]:
    """`custom kernels: 18% of GPU time (vendor 80%: nvjet_...)` and what the reference is."""
    a = result.attribution
    if a is None:
        return []
    lines = [attribution.describe(a)]
    if a.heavy_alone:
        lines.append(
            f"  the reference is {a.heavy_alone} alone ({', '.join(a.reference_ops)}): its "
            "heavy work must run in the candidate's own kernels"
        )
    if a.note and a.gpu_ms > 0:
        lines.append(f"  attribution note: {a.note}")
    return lines


def precision_lines(p: PrecisionReport) -> list[str]:
    """The float64 oracle: the trial with the largest ratio, and what was skipped."""
    if p.note:
        return [f"  float64 oracle: {p.note}"]
    if not p.trials:
        return ["  float64 oracle: no floating outputs to compare"]
    worst = max(p.trials, key=lambda t: (t.downgrade, t.ratio or 0.0))
    verdict = "DOWNGRADE" if worst.downgrade else "ok"
    ratio = f"{worst.ratio:.1f}x" if worst.ratio is not None else "-"
    lines = [
        f"  float64 oracle ({len(p.trials)} comparisons): {verdict}; largest ratio {ratio} on "
        f"{worst.inputs} (candidate {worst.candidate_error:.2e} = {worst.candidate_tol_units:.3g} "
        f"tol, fp32 reference {worst.reference_error:.2e} = {worst.reference_tol_units:.3g} tol; "
        f"flagged above {p.factor:g}x and {p.floor:g} tol)"
    ]
    lines.extend(f"  skipped {s}" for s in p.skipped)
    return lines


def hover_markdown(result: VerifyResult, title: str) -> str:
    """The verify section of the hover on `class ModelNew`: columns, oracle, timelines."""
    lines = [f"**Verifier** · {title}"]
    t = result.timing
    if t is not None and t.candidate is not None:
        rows = ["| | median ms | candidate speedup |", "|---|---|---|"]
        speed = {
            "eager": result.speedup_vs_eager,
            "compile": result.speedup_vs_compile,
            "graph": result.speedup_vs_graph,
            "compile-ro": result.speedup_vs_compile_ro,
        }
        cols = {
            "eager": t.eager,
            "compile": t.compiled,
            "graph": t.graph,
            "compile-ro": t.compiled_ro,
        }
        for key, stats in cols.items():
            if stats is not None:
                best = " (best)" if key == result.best_baseline else ""
                sp = speed[key]
                rows.append(
                    f"| {LABELS[key]}{best} | {stats.median:.4f} | "
                    f"{f'{sp:.2f}x' if sp is not None else '-'} |"
                )
        rows.append(f"| candidate | {t.candidate.median:.4f} | |")
        lines.append("\n".join(rows))
        from stitch_lsp.verify.baselines import missing_notes

        lines.extend(f"*{n}*" for n in missing_notes(t) if "not requested" not in n)
    c = result.correctness
    if c is not None and c.precision is not None:
        lines.append("\n".join(precision_lines(c.precision)).strip())
    if result.attribution is not None:
        lines.append(attribution.describe(result.attribution))
    tl = result.timeline
    if tl is not None:
        for label, one in (("Reference", tl.reference), ("Candidate", tl.candidate)):
            if one is not None:
                top = "; ".join(describe_top(one, 2))
                lines.append(
                    f"{label} timeline: {describe(one)}" + (f". Top: {top}" if top else "")
                )
    return "\n\n".join(lines)
