/** The roofline SVG, checked as geometry: where the roofs and the points land. */

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { KernelRow, Roofs } from "../../src/results/model";
import { decadeLabel, decadeRange, escapeXml, renderRoofline } from "../../src/results/roofline";

// The H200 figures ncu reported for the relu_bias fixture (tests/fixtures/ncu/relu_bias_full.ncu-rep).
const ROOFS: Roofs = { peakGflops: 66121.1, peakGbS: 4807.3, source: "ncu", gpu: "NVIDIA H200" };

function kernel(
  name: string,
  side: "candidate" | "reference",
  ai: number | null,
  gflops: number | null,
): KernelRow {
  return { name, side, arithmeticIntensity: ai, gflops, bottleneck: "memory", durationUs: 56.3 };
}

/** Numbers of an attribute list such as points="x,y x,y". */
function numbers(text: string): number[] {
  return (text.match(/-?\d+(\.\d+)?/g) ?? []).map(Number);
}

function attr(svg: string, element: string, name: string): string[] {
  const re = new RegExp(`<${element}[^>]*?\\s${name}="([^"]*)"`, "g");
  return [...svg.matchAll(re)].map((m) => m[1]);
}

describe("roofline SVG", () => {
  it("labels decades and picks a range one decade beyond the data", () => {
    assert.deepEqual(
      ["0.01", "0.1", "1", "10", "1k", "100k", "1M"],
      [0.01, 0.1, 1, 10, 1000, 1e5, 1e6].map(decadeLabel),
    );
    assert.deepEqual(decadeRange([0.145, 13.75]), [0.01, 1000]);
    assert.equal(escapeXml(`<a href="x">&'`), "&lt;a href=&quot;x&quot;&gt;&amp;&#39;");
  });

  it("draws the memory roof up to the ridge point, then the flat compute roof", () => {
    const { svg } = renderRoofline(ROOFS, [], { width: 640, height: 400 });
    const [x0, y0, xr, yr, x1, y1] = numbers(attr(svg, "polyline", "points")[0]);
    assert.ok(x0 < xr && xr < x1, "left to right");
    assert.equal(yr, y1, "the compute roof is flat");
    assert.ok(y0 > yr, "the memory roof rises towards the ridge");
    // On log-log axes the memory roof has slope 1: equal pixel spans per decade on both axes
    // only when the plot is square, so compare against the axis scales instead.
    const ridge = ROOFS.peakGflops / ROOFS.peakGbS; // 13.75 FLOP/byte
    assert.match(svg, /ridge at 13\.8 FLOP\/byte/);
    assert.match(svg, /FP32 66\.1 TFLOP\/s/);
    assert.match(svg, /DRAM 4,810 GB\/s/);
    assert.ok(ridge > 10 && ridge < 100);
    assert.match(svg, /no kernel with roofline metrics yet/);
    assert.doesNotMatch(svg, /<script|href=|xlink/, "no script or link in the chart");
  });

  it("puts a kernel under the memory roof where its intensity and throughput say", () => {
    const rows = [
      kernel("relu_bias", "candidate", 0.1448, 298.2),
      kernel("relu_ref", "reference", 0.125, 150),
    ];
    const { svg, plotted, missing } = renderRoofline(ROOFS, rows, { width: 640, height: 400 });
    assert.equal(missing.length, 0);
    assert.deepEqual(
      plotted.map((p) => [p.index, p.kernel.name]),
      [
        [1, "relu_bias"],
        [2, "relu_ref"],
      ],
    );
    const [cx] = attr(svg, 'circle class="point candidate"', "cx").map(Number);
    const [cy] = attr(svg, 'circle class="point candidate"', "cy").map(Number);
    // The roof at the same x: interpolate the polyline's memory segment in log space.
    const [x0, y0, xr, yr] = numbers(attr(svg, "polyline", "points")[0]);
    const roofY = y0 + ((cx - x0) / (xr - x0)) * (yr - y0);
    assert.ok(cy > roofY, `the point (y=${cy}) lies below the memory roof (y=${roofY.toFixed(1)})`);
    // A factor of 10 in throughput is one decade on the y axis; 298 GFLOP/s is 0.46 decades below 862
    // (the roof at 0.1448 FLOP/byte: 4807.3 x 0.1448 = 696 GFLOP/s -> log10(696/298.2) = 0.368).
    const decadePx = (() => {
      const ys = attr(svg, 'line class="grid"', "y1")
        .map(Number)
        .filter((y, i, all) => all.indexOf(y) === i);
      const horizontal = ys.filter((y) => y !== ys[0] || true);
      return Math.abs(horizontal[horizontal.length - 1] - horizontal[horizontal.length - 2]);
    })();
    assert.ok(Math.abs((cy - roofY) / decadePx - Math.log10((4807.3 * 0.1448) / 298.2)) < 0.05);
    // The reference is a hollow square, the candidate a filled circle, each with a tooltip and its number.
    assert.match(svg, /<rect class="point reference"/);
    assert.match(
      svg,
      /<title>candidate #1 relu_bias: 0\.145 FLOP\/byte, 298 GFLOP\/s, 56\.3 µs, memory-bound<\/title>/,
    );
    assert.match(svg, /<text class="point-label"[^>]*>2<\/text>/);
    assert.doesNotMatch(svg, /no kernel with roofline metrics yet/);
  });

  it("leaves out kernels without roofline metrics and says which", () => {
    const { plotted, missing } = renderRoofline(ROOFS, [
      kernel("a", "candidate", null, null),
      kernel("b", "candidate", 2, 50),
    ]);
    assert.deepEqual(
      plotted.map((p) => [p.index, p.kernel.name]),
      [[2, "b"]],
    );
    assert.deepEqual(
      missing.map((k) => k.name),
      ["a"],
    );
  });

  it("escapes kernel names (templates and operators are common)", () => {
    const { svg } = renderRoofline(ROOFS, [kernel('k<true>&<"x">', "candidate", 1, 100)]);
    assert.match(svg, /k&lt;true&gt;&amp;&lt;&quot;x&quot;&gt;/);
    assert.doesNotMatch(svg, /k<true>/);
  });
});
