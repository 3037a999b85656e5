"""The human-readable verify report (`stitch-lsp verify` without --json)."""

from __future__ import annotations

from stitch_lsp.models.verify import TimingStats, VerifyResult


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
            if not t.passed:
                lines.append(f"  trial {t.index} output {t.output}: {t.message}")
    t = result.timing
    if t is not None:
        lines.append("timing (median ± std):")
        lines.append(f"  eager      {_fmt(t.eager)}")
        compiled = _fmt(t.compiled) if t.compiled else f"- ({t.compile_note or 'not timed'})"
        lines.append(f"  compile    {compiled}")
        lines.append(f"  candidate  {_fmt(t.candidate)}")
        if t.floor_ms is not None:
            lines.append(f"  roofline floor {t.floor_ms:.4f} ms")
    if result.speedup_vs_eager is not None:
        sp = f"speedup: {result.speedup_vs_eager:.3f}x vs eager"
        if result.speedup_vs_compile is not None:
            sp += f", {result.speedup_vs_compile:.3f}x vs torch.compile"
        lines.append(sp)
    for e in result.exploits:
        lines.append(f"exploit {e.code}: {e.message}")
    for d in result.diagnostics:
        lines.append(f"{d.path}:{d.line}:{d.column}: {d.severity.value} [{d.code}] {d.message}")
    if result.status.value in {"runtime_error", "timeout"} and result.log_tail:
        lines.append("log tail:")
        lines.extend("  " + ln for ln in result.log_tail.strip().splitlines()[-15:])
    lines.append(f"wall: {result.wall_seconds:.1f} s")
    return "\n".join(lines)
