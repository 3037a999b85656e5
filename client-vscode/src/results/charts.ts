/**
 * The results panel's other two pictures, as SVG strings (pure, tested under node):
 *
 * - the timeline: per side (reference, candidate) one bar on a shared millisecond axis, the
 *   forward's window split into the time of each of its top kernels, the rest of its kernels,
 *   and the idle time between launches (the gaps). The verifier keeps per-forward totals, not
 *   each launch's start, so the bar is ordered by share, not by launch; the caption says so.
 * - the speedup per attempt: each attempt's measured speedup over eager, with the 1x line.
 *   An attempt that was not timed (compile-only, failed) gets a mark on the axis, never a value.
 *
 * Neither draws anything that was not measured: with no timeline or no timing they return
 * undefined and the page says why.
 */

import type { AttemptRow, Timeline } from "./model";
import { escapeXml as esc } from "./roofline";

function fmt(value: number, digits = 3): string {
  return Number(value.toPrecision(digits)).toLocaleString("en-US", { maximumFractionDigits: 8 });
}

const r = (v: number) => v.toFixed(1);

/** A round axis step (1, 2 or 5 times a power of ten) giving about `ticks` ticks up to `max`. */
export function niceStep(max: number, ticks = 5): number {
  const raw = max / ticks;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const unit = raw / mag;
  return (unit <= 1 ? 1 : unit <= 2 ? 2 : unit <= 5 ? 5 : 10) * mag;
}

export interface TimelineSegment {
  kind: "kernel" | "other" | "idle";
  name: string;
  ms: number;
}

/** The segments of one bar: top kernels, the other kernels, idle; they sum to the window. */
export function timelineSegments(t: Timeline): TimelineSegment[] {
  const out: TimelineSegment[] = [];
  const busy = Math.min(t.busyMs, t.windowMs);
  let left = busy;
  for (const k of t.top) {
    // Kernels on several streams can overlap: the busy time bounds what they cover.
    const ms = Math.min(k.ms, left);
    if (ms > 0) {
      out.push({ kind: "kernel", name: k.name, ms });
      left -= ms;
    }
  }
  if (left > busy * 1e-3) {
    out.push({ kind: "other", name: "other kernels", ms: left });
  }
  const idle = t.windowMs - busy;
  if (idle > 0) {
    out.push({ kind: "idle", name: "idle", ms: idle });
  }
  return out;
}

export function renderTimeline(
  sides: { label: string; timeline: Timeline }[],
  width = 640,
): string | undefined {
  if (sides.length === 0) {
    return undefined;
  }
  const left = 86;
  const right = 16;
  const lane = 26;
  const top = 10;
  const plotW = width - left - right;
  const max = Math.max(...sides.map((s) => s.timeline.windowMs));
  const step = niceStep(max);
  const end = Math.ceil(max / step - 1e-9) * step;
  const height = top + sides.length * (lane + 14) + 36;
  const sx = (ms: number) => left + (ms / end) * plotW;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="timeline" viewBox="0 0 ${width} ${height}" ` +
      `width="${width}" height="${height}" role="img" aria-label="Timeline of one forward">`,
  ];
  const axisY = top + sides.length * (lane + 14);
  for (let v = 0; v <= end + step / 2; v += step) {
    const x = sx(v);
    parts.push(`<line class="grid" x1="${r(x)}" y1="${top}" x2="${r(x)}" y2="${axisY}"/>`);
    parts.push(`<text class="tick" x="${r(x)}" y="${axisY + 14}" text-anchor="middle">${fmt(v)}</text>`);
  }
  parts.push(
    `<text class="axis" x="${r(left + plotW / 2)}" y="${axisY + 30}" text-anchor="middle">ms per forward</text>`,
  );
  sides.forEach((side, i) => {
    const t = side.timeline;
    const y = top + i * (lane + 14) + 4;
    parts.push(
      `<text class="lane-label" x="${left - 8}" y="${r(y + lane / 2 + 4)}" text-anchor="end">${esc(side.label)}</text>`,
    );
    let at = 0;
    timelineSegments(t).forEach((seg, j) => {
      const x = sx(at);
      const w = Math.max(sx(at + seg.ms) - x, 0.5);
      const cls = seg.kind === "kernel" ? `seg kernel k${j % 4}` : `seg ${seg.kind}`;
      const share = seg.ms / t.windowMs;
      const tip =
        seg.kind === "idle"
          ? `idle ${fmt(seg.ms)} ms (${Math.round(share * 100)}% of the window): ${fmt(t.gaps)} gaps, longest ${fmt(t.maxGapMs)} ms`
          : `${seg.name}: ${fmt(seg.ms)} ms (${Math.round(share * 100)}% of the window)`;
      parts.push(
        `<rect class="${cls}" x="${r(x)}" y="${r(y)}" width="${r(w)}" height="${lane}"><title>${esc(tip)}</title></rect>`,
      );
      at += seg.ms;
    });
    parts.push(
      `<text class="lane-note" x="${r(sx(t.windowMs) + 4 > width - right - 60 ? sx(t.windowMs) - 4 : sx(t.windowMs) + 4)}" ` +
        `y="${r(y - 2)}" text-anchor="${sx(t.windowMs) + 4 > width - right - 60 ? "end" : "start"}">` +
        `${fmt(t.windowMs)} ms, busy ${Math.round(t.busyFraction * 100)}%</text>`,
    );
  });
  parts.push("</svg>");
  return parts.join("");
}

export interface SpeedupPoint {
  index: number;
  attempt: AttemptRow;
  speedup: number | null;
}

/** The attempts in the panel's order, with their measured speedup over eager or null. */
export function speedupPoints(attempts: AttemptRow[]): SpeedupPoint[] {
  return attempts.map((attempt, i) => ({
    index: i + 1,
    attempt,
    speedup:
      typeof attempt.speedupVsEager === "number" &&
      Number.isFinite(attempt.speedupVsEager) &&
      attempt.speedupVsEager > 0
        ? attempt.speedupVsEager
        : null,
  }));
}

export function renderSpeedups(attempts: AttemptRow[], width = 640, height = 220): string | undefined {
  const points = speedupPoints(attempts);
  const timed = points.filter((p) => p.speedup !== null);
  if (timed.length === 0) {
    return undefined;
  }
  const m = { left: 48, right: 16, top: 14, bottom: 40 };
  const plotW = width - m.left - m.right;
  const plotH = height - m.top - m.bottom;
  const ymax = Math.max(1.25, ...timed.map((p) => (p.speedup as number) * 1.1));
  const step = niceStep(ymax, 4);
  const yend = Math.ceil(ymax / step - 1e-9) * step;
  const n = points.length;
  const sx = (i: number) => m.left + (n === 1 ? plotW / 2 : ((i - 1) / (n - 1)) * plotW);
  const sy = (v: number) => m.top + plotH - (v / yend) * plotH;
  const parts: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" class="speedups" viewBox="0 0 ${width} ${height}" ` +
      `width="${width}" height="${height}" role="img" aria-label="Speedup over eager per attempt">`,
  ];
  for (let v = 0; v <= yend + step / 2; v += step) {
    const y = sy(v);
    parts.push(`<line class="grid" x1="${m.left}" y1="${r(y)}" x2="${m.left + plotW}" y2="${r(y)}"/>`);
    parts.push(`<text class="tick" x="${m.left - 6}" y="${r(y + 4)}" text-anchor="end">${fmt(v)}x</text>`);
  }
  parts.push(
    `<line class="parity" x1="${m.left}" y1="${r(sy(1))}" x2="${m.left + plotW}" y2="${r(sy(1))}">` +
      `<title>1x: as fast as eager PyTorch</title></line>`,
  );
  const line = timed.map((p) => `${r(sx(p.index))},${r(sy(p.speedup as number))}`).join(" ");
  if (timed.length > 1) {
    parts.push(`<polyline class="trend" fill="none" points="${line}"/>`);
  }
  for (const p of points) {
    const x = sx(p.index);
    const a = p.attempt;
    parts.push(
      `<text class="tick" x="${r(x)}" y="${m.top + plotH + 16}" text-anchor="middle">${a.attempt}</text>`,
    );
    if (p.speedup === null) {
      parts.push(
        `<g class="untimed"><line x1="${r(x)}" y1="${m.top + plotH - 6}" x2="${r(x)}" y2="${m.top + plotH}"/>` +
          `<title>${esc(`attempt ${a.attempt} (${a.stage}): ${a.status}, not timed`)}</title></g>`,
      );
      continue;
    }
    const cls = a.correct === false ? "point wrong" : "point";
    parts.push(
      `<g class="attempt"><circle class="${cls}" cx="${r(x)}" cy="${r(sy(p.speedup))}" r="4.5"/>` +
        `<title>${esc(`attempt ${a.attempt} (${a.stage}): ${fmt(p.speedup)}x over eager, ${a.status}`)}</title></g>`,
    );
  }
  parts.push(
    `<text class="axis" x="${r(m.left + plotW / 2)}" y="${height - 6}" text-anchor="middle">attempt</text>`,
  );
  parts.push("</svg>");
  return parts.join("");
}
