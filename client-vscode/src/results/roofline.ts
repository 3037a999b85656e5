/**
 * The roofline chart as an SVG string: log-log axes of arithmetic intensity (FLOP per DRAM byte)
 * against achieved GFLOP/s, the GPU's memory roof (bandwidth x intensity) up to the ridge point
 * and its compute roof after it, and each profiled kernel as a point: the candidate's as filled
 * circles, the reference's as hollow squares, numbered like the kernel table.
 *
 * Pure string building (no DOM), so node tests can check it. Colours are not set here: every
 * element has a class, and the panel's stylesheet maps the classes to VS Code theme variables.
 */

import type { KernelRow, Roofs } from "./model";

export interface RooflineOptions {
  width?: number;
  height?: number;
}

export interface PlottedKernel {
  /** 1-based number shown beside the point and in the table. */
  index: number;
  kernel: KernelRow;
  x: number;
  y: number;
}

export interface Roofline {
  svg: string;
  plotted: PlottedKernel[];
  /** Kernels without roofline metrics (not on the chart). */
  missing: KernelRow[];
}

const MARGIN = { left: 64, right: 16, top: 28, bottom: 46 };

export function escapeXml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

/** 1, 10, 100, 1k, 10k, ... and 0.1, 0.01. */
export function decadeLabel(value: number): string {
  const exp = Math.round(Math.log10(value));
  if (exp >= 6) {
    return `${10 ** (exp - 6)}M`;
  }
  if (exp >= 3) {
    return `${10 ** (exp - 3)}k`;
  }
  if (exp >= 0) {
    return `${10 ** exp}`;
  }
  return value.toFixed(-exp);
}

/** The smallest decade range [10^a, 10^b] that holds every value, widened by one decade. */
export function decadeRange(values: number[]): [number, number] {
  const good = values.filter((v) => Number.isFinite(v) && v > 0);
  const lo = Math.floor(Math.log10(Math.min(...good))) - 1;
  const hi = Math.ceil(Math.log10(Math.max(...good))) + 1;
  return [10 ** lo, 10 ** Math.max(hi, lo + 2)];
}

function fmt(value: number, digits = 3): string {
  return Number(value.toPrecision(digits)).toLocaleString("en-US");
}

export function renderRoofline(roofs: Roofs, kernels: KernelRow[], opts: RooflineOptions = {}): Roofline {
  const width = opts.width ?? 640;
  const height = opts.height ?? 400;
  const ridge = roofs.peakGflops / roofs.peakGbS;
  const onChart = kernels.filter(
    (k) =>
      typeof k.arithmeticIntensity === "number" &&
      k.arithmeticIntensity > 0 &&
      typeof k.gflops === "number" &&
      k.gflops > 0,
  );
  const missing = kernels.filter((k) => !onChart.includes(k));
  const xs = [ridge, ...onChart.map((k) => k.arithmeticIntensity as number)];
  const ys = [roofs.peakGflops, ...onChart.map((k) => k.gflops as number)];
  const [x0, x1] = decadeRange(xs);
  let [y0, y1] = decadeRange(ys);
  // Keep the memory roof's foot on the chart: it starts at bandwidth x the smallest intensity.
  y0 = Math.min(y0, 10 ** Math.floor(Math.log10(roofs.peakGbS * x0)));
  y1 = Math.max(y1, 10 ** Math.ceil(Math.log10(roofs.peakGflops * 2)));

  const plotW = width - MARGIN.left - MARGIN.right;
  const plotH = height - MARGIN.top - MARGIN.bottom;
  const sx = (x: number) =>
    MARGIN.left + ((Math.log10(x) - Math.log10(x0)) / (Math.log10(x1) - Math.log10(x0))) * plotW;
  const sy = (y: number) =>
    MARGIN.top + plotH - ((Math.log10(y) - Math.log10(y0)) / (Math.log10(y1) - Math.log10(y0))) * plotH;
  const r = (v: number) => v.toFixed(1);

  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="roofline" viewBox="0 0 ${width} ${height}" ` +
      `width="${width}" height="${height}" role="img" aria-label="Roofline chart">`,
  );
  parts.push(
    `<title>Roofline: ${escapeXml(fmt(roofs.peakGbS))} GB/s DRAM, ${escapeXml(fmt(roofs.peakGflops))} GFLOP/s FP32</title>`,
  );
  // Grid and axes, one line per decade.
  for (let e = Math.round(Math.log10(x0)); e <= Math.round(Math.log10(x1)); e++) {
    const x = sx(10 ** e);
    parts.push(
      `<line class="grid" x1="${r(x)}" y1="${MARGIN.top}" x2="${r(x)}" y2="${MARGIN.top + plotH}"/>`,
    );
    parts.push(
      `<text class="tick" x="${r(x)}" y="${MARGIN.top + plotH + 16}" text-anchor="middle">${decadeLabel(10 ** e)}</text>`,
    );
  }
  for (let e = Math.round(Math.log10(y0)); e <= Math.round(Math.log10(y1)); e++) {
    const y = sy(10 ** e);
    parts.push(
      `<line class="grid" x1="${MARGIN.left}" y1="${r(y)}" x2="${MARGIN.left + plotW}" y2="${r(y)}"/>`,
    );
    parts.push(
      `<text class="tick" x="${MARGIN.left - 6}" y="${r(y + 4)}" text-anchor="end">${decadeLabel(10 ** e)}</text>`,
    );
  }
  parts.push(
    `<rect class="frame" x="${MARGIN.left}" y="${MARGIN.top}" width="${plotW}" height="${plotH}" fill="none"/>`,
  );
  parts.push(
    `<text class="axis" x="${MARGIN.left + plotW / 2}" y="${height - 8}" text-anchor="middle">` +
      "arithmetic intensity (FLOP / DRAM byte)</text>",
  );
  parts.push(
    `<text class="axis" transform="translate(14 ${MARGIN.top + plotH / 2}) rotate(-90)" text-anchor="middle">GFLOP/s</text>`,
  );
  // The roofs.
  const footY = roofs.peakGbS * x0;
  parts.push(
    `<polyline class="roof" fill="none" points="${r(sx(x0))},${r(sy(footY))} ${r(sx(ridge))},${r(sy(roofs.peakGflops))} ` +
      `${r(sx(x1))},${r(sy(roofs.peakGflops))}">` +
      `<title>memory roof ${escapeXml(fmt(roofs.peakGbS))} GB/s, compute roof ${escapeXml(fmt(roofs.peakGflops))} GFLOP/s, ridge at ${escapeXml(fmt(ridge))} FLOP/byte</title></polyline>`,
  );
  parts.push(
    `<line class="ridge" x1="${r(sx(ridge))}" y1="${r(sy(roofs.peakGflops))}" x2="${r(sx(ridge))}" y2="${MARGIN.top + plotH}"/>`,
  );
  parts.push(
    `<text class="roof-label" x="${r(sx(ridge) + 6)}" y="${r(sy(roofs.peakGflops) - 6)}">FP32 ${escapeXml(fmt(roofs.peakGflops / 1000))} TFLOP/s</text>`,
  );
  // The memory roof's label sits at its foot, along the line, away from the kernels in the middle.
  const labelX = x0 * 1.6;
  const angle = (Math.atan2(sy(roofs.peakGbS * ridge) - sy(footY), sx(ridge) - sx(x0)) * 180) / Math.PI;
  const lx0 = sx(labelX);
  const ly0 = sy(roofs.peakGbS * labelX) - 6;
  parts.push(
    `<text class="roof-label" transform="translate(${r(lx0)} ${r(ly0)}) rotate(${angle.toFixed(1)})">` +
      `DRAM ${escapeXml(fmt(roofs.peakGbS))} GB/s</text>`,
  );
  // The kernels: reference first, so the candidate's points are drawn on top.
  const plotted: PlottedKernel[] = kernels
    .map((kernel, i) => ({ kernel, index: i + 1 }))
    .filter(({ kernel }) => onChart.includes(kernel))
    .map(({ kernel, index }) => ({
      index,
      kernel,
      x: sx(kernel.arithmeticIntensity as number),
      y: sy(kernel.gflops as number),
    }));
  const order = [...plotted].sort(
    (a, b) => Number(a.kernel.side === "candidate") - Number(b.kernel.side === "candidate"),
  );
  for (const p of order) {
    const k = p.kernel;
    const tip =
      `${k.side} #${p.index} ${k.name}: ${fmt(k.arithmeticIntensity as number)} FLOP/byte, ` +
      `${fmt(k.gflops as number)} GFLOP/s` +
      (typeof k.durationUs === "number" ? `, ${fmt(k.durationUs)} µs` : "") +
      `, ${k.bottleneck}-bound`;
    const shape =
      k.side === "candidate"
        ? `<circle class="point candidate" cx="${r(p.x)}" cy="${r(p.y)}" r="5"/>`
        : `<rect class="point reference" x="${r(p.x - 5)}" y="${r(p.y - 5)}" width="10" height="10"/>`;
    parts.push(
      `<g class="kernel" data-index="${p.index}">${shape}` +
        `<text class="point-label" x="${r(p.x + 8)}" y="${r(p.y - 6)}">${p.index}</text>` +
        `<title>${escapeXml(tip)}</title></g>`,
    );
  }
  // Legend.
  const lx = MARGIN.left + 10;
  const ly = MARGIN.top + 14;
  parts.push(`<circle class="point candidate" cx="${lx}" cy="${ly}" r="5"/>`);
  parts.push(`<text class="legend" x="${lx + 10}" y="${ly + 4}">candidate</text>`);
  parts.push(`<rect class="point reference" x="${lx + 85}" y="${ly - 5}" width="10" height="10"/>`);
  parts.push(`<text class="legend" x="${lx + 100}" y="${ly + 4}">reference</text>`);
  if (plotted.length === 0) {
    parts.push(
      `<text class="empty" x="${MARGIN.left + plotW / 2}" y="${MARGIN.top + plotH / 2}" text-anchor="middle">` +
        "no kernel with roofline metrics yet</text>",
    );
  }
  parts.push("</svg>");
  return { svg: parts.join(""), plotted, missing };
}
