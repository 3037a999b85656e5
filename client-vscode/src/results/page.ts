/**
 * The results panel's HTML: attempt history with the speedup of each attempt, verify result,
 * the plan (fusion groups and the reference lines they cover), the rubric, the timeline of one
 * forward (reference and candidate on one axis), the roofline and the sortable kernel table
 * (reference beside candidate).
 *
 * Pure string building, tested under node. The page loads nothing remote: one inline stylesheet
 * and one inline script, both allowed only by a fresh nonce in a strict Content-Security-Policy.
 * Colours come from VS Code's theme variables, so the page follows light, dark and high-contrast
 * themes. The script only posts messages back (refresh, compare, reveal a line).
 */

import { renderSpeedups, renderTimeline } from "./charts";
import type { AttemptRow, KernelRow, Plan, Results, Timeline, VerifySummary } from "./model";
import { escapeXml as esc, renderRoofline } from "./roofline";

export interface PageOptions {
  nonce: string;
  /** The webview's `cspSource` (for nothing but completeness: the page loads no resources). */
  cspSource: string;
}

export type PanelMessage =
  | { type: "refresh" }
  | { type: "compare" }
  | { type: "addReferenceReport" }
  | { type: "reveal"; line: number; target: "file" | "reference" };

/** Messages from the page; anything else is ignored. */
export function parsePanelMessage(raw: unknown): PanelMessage | undefined {
  if (typeof raw !== "object" || raw === null) {
    return undefined;
  }
  const msg = raw as Record<string, unknown>;
  if (msg.type === "refresh" || msg.type === "compare" || msg.type === "addReferenceReport") {
    return { type: msg.type };
  }
  if (msg.type === "reveal" && typeof msg.line === "number" && Number.isInteger(msg.line) && msg.line >= 1) {
    return { type: "reveal", line: msg.line, target: msg.target === "reference" ? "reference" : "file" };
  }
  return undefined;
}

export function contentSecurityPolicy(opts: PageOptions): string {
  return [
    "default-src 'none'",
    `img-src ${opts.cspSource} data:`,
    `style-src 'nonce-${opts.nonce}'`,
    `script-src 'nonce-${opts.nonce}'`,
  ].join("; ");
}

const STYLE = `
body { color: var(--vscode-foreground); background: var(--vscode-editor-background);
  font-family: var(--vscode-font-family); font-size: var(--vscode-font-size); padding: 0 16px 24px; }
h1 { font-size: 1.3em; margin: 12px 0 2px; }
h2 { font-size: 1.1em; margin: 20px 0 6px; border-bottom: 1px solid var(--vscode-panel-border); padding-bottom: 2px; }
.sub, .note, .source { color: var(--vscode-descriptionForeground); }
table { border-collapse: collapse; margin: 4px 0; }
th, td { padding: 2px 10px 2px 0; text-align: right; white-space: nowrap; }
th { color: var(--vscode-descriptionForeground); font-weight: normal; border-bottom: 1px solid var(--vscode-panel-border); }
td.text, th.text { text-align: left; }
tr.this-file td { font-weight: bold; }
.ok { color: var(--vscode-testing-iconPassed, var(--vscode-charts-green)); }
.bad { color: var(--vscode-errorForeground); }
.warn { color: var(--vscode-editorWarning-foreground, var(--vscode-charts-yellow)); }
button { color: var(--vscode-button-foreground); background: var(--vscode-button-background);
  border: none; padding: 3px 10px; margin-right: 6px; cursor: pointer; }
button:hover { background: var(--vscode-button-hoverBackground); }
a.line { color: var(--vscode-textLink-foreground); cursor: pointer; text-decoration: none; }
.roofline { max-width: 100%; height: auto; }
.roofline .grid { stroke: var(--vscode-panel-border); stroke-width: 0.5; }
.roofline .frame { stroke: var(--vscode-descriptionForeground); stroke-width: 0.8; }
.roofline text { fill: var(--vscode-foreground); font-size: 11px; }
.roofline .tick, .roofline .axis { fill: var(--vscode-descriptionForeground); }
.roofline .roof { stroke: var(--vscode-charts-red, var(--vscode-foreground)); stroke-width: 2.5; }
.roofline .ridge { stroke: var(--vscode-charts-red, var(--vscode-foreground)); stroke-dasharray: 3 3; stroke-width: 1; }
.roofline .point.candidate { fill: var(--vscode-charts-blue); stroke: var(--vscode-editor-background); }
.roofline .point.reference { fill: none; stroke: var(--vscode-charts-orange); stroke-width: 2; }
.roofline .empty { fill: var(--vscode-descriptionForeground); font-style: italic; }
.swatch-c { color: var(--vscode-charts-blue); } .swatch-r { color: var(--vscode-charts-orange); }
.scroll { max-width: 100%; overflow-x: auto; }
/* The panel is often narrow (beside the editor): headers and sentences wrap rather than widen
   the page. */
th { white-space: normal; vertical-align: bottom; }
table.plan-groups td.text, table.rubric td.text, .pair td.text { white-space: normal; overflow-wrap: anywhere; }
table.rubric th { white-space: nowrap; }
table.rubric th, table.rubric td { vertical-align: top; }
table.plan-groups td.note { min-width: 14em; }
/* The kernel table fits the panel where it can (kernel names wrap anywhere, cells sit closer);
   it scrolls in its container where it still cannot. */
table.kernels { font-size: 0.95em; }
table.kernels th, table.kernels td { padding: 2px 5px 2px 0; }
table.kernels td.kname { white-space: normal; overflow-wrap: anywhere; min-width: 6em; }
table.sortable th.sort { cursor: pointer; user-select: none; }
table.sortable th.sort:hover { color: var(--vscode-foreground); }
table.sortable th[aria-sort=ascending]::after { content: " ▲"; }
table.sortable th[aria-sort=descending]::after { content: " ▼"; }
.pair { display: flex; flex-wrap: wrap; gap: 24px; }
.pair > div { flex: 1 1 260px; min-width: 0; }
.pair h3 { font-size: 1em; margin: 6px 0 2px; }
ul.reasons { margin: 0; padding-left: 18px; }
.timeline, .speedups { max-width: 100%; height: auto; }
.timeline text, .speedups text { fill: var(--vscode-foreground); font-size: 11px; }
.timeline .tick, .timeline .axis, .speedups .tick, .speedups .axis, .timeline .lane-note { fill: var(--vscode-descriptionForeground); }
.timeline .grid, .speedups .grid { stroke: var(--vscode-panel-border); stroke-width: 0.5; }
.timeline .seg { stroke: var(--vscode-editor-background); stroke-width: 1; }
.timeline .seg.k0 { fill: var(--vscode-charts-blue); } .timeline .seg.k1 { fill: var(--vscode-charts-purple); }
.timeline .seg.k2 { fill: var(--vscode-charts-green); } .timeline .seg.k3 { fill: var(--vscode-charts-yellow); }
.timeline .seg.other { fill: var(--vscode-descriptionForeground); }
.timeline .seg.idle { fill: none; stroke: var(--vscode-charts-red); stroke-dasharray: 3 2; }
.speedups .parity { stroke: var(--vscode-descriptionForeground); stroke-dasharray: 4 3; }
.speedups .trend { stroke: var(--vscode-charts-blue); stroke-width: 1.5; }
.speedups .point { fill: var(--vscode-charts-blue); }
.speedups .point.wrong { fill: var(--vscode-errorForeground); }
.speedups .untimed line { stroke: var(--vscode-descriptionForeground); stroke-width: 2; }
`;

const SCRIPT = `
const vscode = acquireVsCodeApi();
document.querySelectorAll("[data-action]").forEach((el) =>
  el.addEventListener("click", () => vscode.postMessage({ type: el.dataset.action })));
document.querySelectorAll("[data-line]").forEach((el) =>
  el.addEventListener("click", () => vscode.postMessage({
    type: "reveal", line: Number(el.dataset.line), target: el.dataset.target || "file" })));
// Sortable tables: a click on a header sorts by its column (numbers as numbers, blanks last).
document.querySelectorAll("table.sortable").forEach((table) => {
  const heads = [...table.tHead.rows[0].cells];
  heads.forEach((th) => th.classList.contains("sort") && th.addEventListener("click", () => {
    const dir = th.getAttribute("aria-sort") === "ascending" ? "descending" : "ascending";
    heads.forEach((h) => h.removeAttribute("aria-sort"));
    th.setAttribute("aria-sort", dir);
    const col = th.cellIndex;
    const sign = dir === "ascending" ? 1 : -1;
    const body = table.tBodies[0];
    const key = (row) => row.cells[col].dataset.v ?? "";
    [...body.rows].sort((a, b) => {
      const x = key(a), y = key(b);
      if (x === "" || y === "") return (x === "") - (y === "");
      const nx = Number(x), ny = Number(y);
      const c = Number.isNaN(nx) || Number.isNaN(ny) ? x.localeCompare(y) : nx - ny;
      return sign * c;
    }).forEach((row) => body.appendChild(row));
  }));
});
`;

function num(value: number | null | undefined, digits = 3, suffix = ""): string {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    return "–";
  }
  return `${Number(value.toPrecision(digits)).toLocaleString("en-US", { maximumFractionDigits: 8 })}${suffix}`;
}

function statusClass(status: string): string {
  if (status === "passed") {
    return "ok";
  }
  if (status === "compiled" || status === "no_gpu") {
    return "warn";
  }
  return "bad";
}

function attemptsTable(rows: AttemptRow[]): string {
  if (rows.length === 0) {
    return `<p class="note">No generate or optimize run recorded for this reference yet.</p>`;
  }
  const head =
    "<tr><th>run</th><th>#</th><th class=text>stage</th><th class=text>status</th>" +
    "<th>vs eager</th><th>vs torch.compile</th><th>rubric</th><th>reward</th><th class=text></th></tr>";
  const body = rows
    .map(
      (a) =>
        `<tr class="${a.thisFile ? "this-file" : ""}" title="${esc(a.message)}">` +
        `<td class=text>${esc(a.runId.slice(-8))}</td><td>${a.attempt}</td>` +
        `<td class=text>${esc(a.stage)}</td>` +
        `<td class="text ${statusClass(a.status)}">${esc(a.status)}</td>` +
        `<td>${num(a.speedupVsEager, 3, "x")}</td><td>${num(a.speedupVsCompile, 3, "x")}</td>` +
        `<td>${a.rubric ?? "–"}${typeof a.rubric === "number" ? "/20" : ""}</td>` +
        `<td>${num(a.reward, 3)}</td>` +
        `<td class=text>${a.thisFile ? "this file" : a.accepted ? "accepted" : ""}</td></tr>`,
    )
    .join("");
  return `<table>${head}${body}</table>`;
}

function speedupBlock(rows: AttemptRow[]): string {
  if (rows.length === 0) {
    return "";
  }
  const svg = renderSpeedups(rows);
  if (svg === undefined) {
    return (
      `<p class="note no-timing">No timing: no attempt was timed on a GPU (compile-only runs build and ` +
      `check the code, they measure nothing), so there is no speedup to plot.</p>`
    );
  }
  return `<div class="chart">${svg}</div><p class="source">Speedup over eager PyTorch per attempt; marks on the axis: attempts that were not timed.</p>`;
}

/** The attempt the rubric and plan describe: this file's, else the last accepted, else the last. */
function shownAttempt(rows: AttemptRow[]): AttemptRow | undefined {
  return rows.find((a) => a.thisFile) ?? [...rows].reverse().find((a) => a.accepted) ?? rows[rows.length - 1];
}

const RUBRIC_NAMES: Record<string, string> = {
  anti_hacking: "anti-hacking",
  engineering: "engineering",
  coverage: "coverage",
  compliance: "compliance",
};

function rubricBlock(rows: AttemptRow[]): string {
  const a = shownAttempt(rows);
  const items = a?.rubricItems ?? [];
  if (a === undefined || items.length === 0) {
    return `<p class="note">No rubric recorded.</p>`;
  }
  const body = items
    .map(
      (i) =>
        `<tr><th class=text>${esc(RUBRIC_NAMES[i.name] ?? i.name)}</th><td>${i.score}/5</td>` +
        `<td class=text><ul class="reasons">${i.reasons.map((r) => `<li>${esc(r)}</li>`).join("")}</ul></td></tr>`,
    )
    .join("");
  return (
    `<p class="sub">Attempt ${a.attempt} (${esc(a.stage)}): ${a.rubric ?? "–"}/20</p>` +
    `<table class="rubric">${body}</table>`
  );
}

function planBlock(plan: Plan | null | undefined): string {
  if (!plan) {
    return `<p class="note">No plan recorded for this reference yet (Generate writes one).</p>`;
  }
  const groups = plan.groups
    .map((g) => {
      const ops = g.ops
        .map((op, i) => {
          const line = g.lines[i];
          return line
            ? `${esc(op)} <a class="line" data-line="${line}" data-target="reference" title="reference line ${line}">line ${line}</a>`
            : esc(op);
        })
        .join(", ");
      return `<tr><td class=text>${esc(g.name)}</td><td class=text>${ops}</td><td class="text note">${esc(g.rationale)}</td></tr>`;
    })
    .join("");
  const table =
    plan.groups.length > 0
      ? `<table class="plan-groups"><tr><th class=text>fusion group</th><th class=text>ops (reference lines)</th><th class=text>why</th></tr>${groups}</table>`
      : `<p class="note">The plan has no fusion groups.</p>`;
  const list = (title: string, items: string[]) =>
    items.length > 0 ? `<h3>${title}</h3><ul>${items.map((x) => `<li>${esc(x)}</li>`).join("")}</ul>` : "";
  return (
    `<p>${esc(plan.summary)} <span class="note">(revision ${plan.revision})</span></p>${table}` +
    list("Steps", plan.steps) +
    list("Correctness risks", plan.risks)
  );
}

function timelineBlock(results: Results): string {
  const t = results.verify?.timeline;
  const sides: { label: string; timeline: Timeline }[] = [];
  if (t?.reference) {
    sides.push({ label: "reference", timeline: t.reference });
  }
  if (t?.candidate) {
    sides.push({ label: "candidate", timeline: t.candidate });
  }
  const svg = renderTimeline(sides);
  if (svg === undefined) {
    const why =
      t?.note ?? (results.verify ? "the verifier recorded no timeline" : "not verified in this session");
    return `<p class="note no-timing">No timing: ${esc(why)}. Nothing is drawn without a measurement.</p>`;
  }
  const describe = (label: string, x: Timeline) =>
    `${label}: ${num(x.kernels)} kernel launches, GPU busy ${Math.round(x.busyFraction * 100)}% of ${num(x.windowMs)} ms, ` +
    `${num(x.gaps)} gaps (${num(x.gapMs)} ms, longest ${num(x.maxGapMs)} ms)` +
    (typeof x.hostMs === "number" ? `, host ${num(x.hostMs)} ms per call` : "");
  const missing = ["reference", "candidate"].filter((s) => !sides.some((x) => x.label === s));
  return (
    `<div class="chart">${svg}</div><p class="source">${sides.map((s) => esc(describe(s.label, s.timeline))).join("<br>")}` +
    (missing.length > 0
      ? `<br>No timeline for the ${missing.join(" or ")}${t?.note ? `: ${esc(t.note)}` : ""}.`
      : "") +
    `<br>Per forward, averaged over ${sides[0].timeline.forwards} profiled forwards: each bar is the forward's window, ` +
    `split into its kernels' time (largest first) and the idle time between launches (dashed). The verifier keeps ` +
    `these totals, not each launch's start, so the order within a bar is by share, not by launch.</p>`
  );
}

function verifyBlock(v: VerifySummary | null | undefined, role: Results["role"]): string {
  if (v === null || v === undefined) {
    return role === "candidate"
      ? `<p class="note">Not verified in this session. Run <b>Verify against reference</b> (code lens on ModelNew).</p>`
      : `<p class="note">Verification applies to a generated file (ModelNew); open it to see its result.</p>`;
  }
  const rows: [string, string][] = [
    [
      "status",
      `<span class="${statusClass(v.status)}">${esc(v.title)}</span>${v.stale ? " <span class=warn>(stale: file changed)</span>" : ""}`,
    ],
    ["speedup vs eager", num(v.speedupVsEager, 3, "x")],
    ["speedup vs torch.compile", num(v.speedupVsCompile, 3, "x")],
    [
      "time: candidate / eager / torch.compile",
      `${num(v.candidateMs, 3, " ms")} / ${num(v.eagerMs, 3, " ms")} / ${num(v.compiledMs, 3, " ms")}`,
    ],
  ];
  if (typeof v.maxAbsError === "number") {
    rows.push(["max abs error", num(v.maxAbsError, 2)]);
  }
  if (v.gpu) {
    rows.push(["GPU", esc(v.gpu)]);
  }
  if (v.message) {
    rows.push(["message", esc(v.message)]);
  }
  return `<table>${rows.map(([k, val]) => `<tr><th class=text>${k}</th><td class=text>${val}</td></tr>`).join("")}</table>`;
}

/** A cell with its sort key: numbers sort as numbers, text as text, a blank last. `text` left-aligns
 * it (a string adds that class too). */
function cell(
  shown: string,
  value: number | string | null | undefined,
  text: boolean | string = false,
): string {
  const v =
    typeof value === "number"
      ? Number.isFinite(value)
        ? String(value)
        : ""
      : typeof value === "string"
        ? value
        : "";
  const cls = text === false ? "" : typeof text === "string" ? ` class="text ${text}"` : " class=text";
  return `<td${cls} data-v="${esc(v)}">${shown}</td>`;
}

/** [title, left-aligned, how the header shows it (where it may break: a soft hyphen, a
 * zero-width space)]. The side is its swatch, as in the roofline's legend (the word in its title). */
const KERNEL_COLUMNS: [string, boolean, string?][] = [
  ["#", false],
  ["side", true],
  ["kernel", true],
  ["time µs", false],
  ["SM %", false],
  ["memory %", false],
  ["DRAM GB/s", false],
  ["occupancy %", false, "occu&shy;pancy %"],
  ["regs", false],
  ["grid × block", false],
  ["bound", true],
  ["FLOP/byte", false, "FLOP/&#8203;byte"],
  ["GFLOP/s", false, "GFLOP/&#8203;s"],
];

function kernelsTable(kernels: KernelRow[], profiler: string | null | undefined): string {
  if (kernels.length === 0) {
    const why = profiler
      ? ` It cannot run here: ${esc(profiler)}. <b>Show Nsight Compute Report…</b> reads a report made elsewhere.`
      : " Run <b>Profile with Nsight Compute</b>.";
    return `<p class="note">Not profiled yet.${why}</p>`;
  }
  const head =
    "<thead><tr>" +
    KERNEL_COLUMNS.map(
      ([title, text, shown]) =>
        `<th class="sort${text ? " text" : ""}" title="sort by ${esc(title)}">${shown ?? esc(title)}</th>`,
    ).join("") +
    "</tr></thead>";
  const body = kernels
    .map((k, i) => {
      const name =
        typeof k.line === "number"
          ? `<a class="line" data-line="${k.line}" title="line ${k.line}">${esc(k.name)}</a>`
          : esc(k.name);
      const side =
        k.side === "candidate"
          ? `<span class=swatch-c title="candidate" aria-label="candidate">●</span>`
          : `<span class=swatch-r title="reference" aria-label="reference">□</span>`;
      return (
        `<tr>${cell(String(i + 1), i + 1)}${cell(side, k.side, true)}${cell(name, k.name, "kname")}` +
        cell(num(k.durationUs), k.durationUs) +
        cell(num(k.smPct, 3), k.smPct) +
        cell(num(k.memoryPct, 3), k.memoryPct) +
        cell(num(k.dramGbS, 4), k.dramGbS) +
        cell(num(k.occupancyPct, 3), k.occupancyPct) +
        cell(String(k.registers ?? "–"), k.registers) +
        cell(`${k.grid ?? "–"}×${k.block ?? "–"}`, (k.grid ?? 0) * (k.block ?? 0) || null) +
        cell(esc(k.bottleneck), k.bottleneck, true) +
        cell(num(k.arithmeticIntensity), k.arithmeticIntensity) +
        cell(num(k.gflops, 4), k.gflops) +
        "</tr>"
      );
    })
    .join("");
  return `<div class="scroll"><table class="sortable kernels">${head}<tbody>${body}</tbody></table></div>`;
}

/** Reference and candidate side by side: kernels and GPU time from the profile. */
function sidesBlock(kernels: KernelRow[]): string {
  const side = (name: "reference" | "candidate") => {
    const ks = kernels.filter((k) => k.side === name);
    if (ks.length === 0) {
      return `<div><h3>${name}</h3><p class="note">not profiled</p></div>`;
    }
    const total = ks.reduce((sum, k) => sum + (typeof k.durationUs === "number" ? k.durationUs : 0), 0);
    const slow = [...ks].sort((a, b) => (b.durationUs ?? 0) - (a.durationUs ?? 0))[0];
    return (
      `<div><h3>${name}</h3><table>` +
      `<tr><th class=text>kernels</th><td>${ks.length}</td></tr>` +
      `<tr><th class=text>GPU time</th><td>${num(total)} µs</td></tr>` +
      `<tr><th class=text>slowest</th><td class=text>${esc(slow.name)} (${esc(slow.bottleneck)}-bound)</td></tr>` +
      `</table></div>`
    );
  };
  return `<div class="pair sides">${side("reference")}${side("candidate")}</div>`;
}

function rooflineBlock(results: Results): string {
  if (!results.roofs) {
    return `<p class="note">No roofs known for this GPU.</p>`;
  }
  const chart = renderRoofline(results.roofs, results.kernels);
  const roofs = results.roofs;
  const ncu =
    typeof roofs.ncuPeakGbS === "number"
      ? ` The report's own DRAM peak, ${num(roofs.ncuPeakGbS, 3)} GB/s, is ncu's nominal figure; the roof drawn is the one every Stitch view uses.`
      : "";
  const source = `Roofs: ${esc(roofs.source)} (DRAM ${num(roofs.peakGbS, 3)} GB/s, FP32 ${num(roofs.peakGflops / 1000, 3)} TFLOP/s).${ncu}`;
  const sides = new Set(results.kernels.map((k) => k.side));
  const refNote =
    results.role === "candidate" && sides.has("candidate") && !sides.has("reference")
      ? ` The reference's kernels are not on the chart: it was not profiled.`
      : "";
  const missing =
    chart.missing.length > 0
      ? ` Not on the chart (no roofline metrics in the report): ${chart.missing.map((k) => esc(k.name)).join(", ")}.`
      : "";
  return `<div class="chart">${chart.svg}</div><p class="source">${source}${missing}${refNote}</p>`;
}

function sameFile(uri: string, filePath: string): boolean {
  try {
    return decodeURIComponent(new URL(uri).pathname) === filePath;
  } catch {
    return false;
  }
}

export function resultsPage(results: Results | undefined, opts: PageOptions, error?: string): string {
  const csp = contentSecurityPolicy(opts);
  let body: string;
  if (results === undefined) {
    body = `<h1>Stitch results</h1><p class="note">${esc(error ?? "Open a Python file with a Model or ModelNew.")}</p>`;
  } else {
    const role =
      results.role === "candidate"
        ? `CUDA implementation${results.reference ? ` of ${esc(results.referenceLabel ?? results.reference)}` : ""}`
        : results.role === "reference"
          ? "reference (KernelBench Model)"
          : "no Model or ModelNew here";
    // A file that holds both Model and ModelNew is its own reference: nothing to compare.
    const compare =
      results.role === "candidate" && results.reference && !sameFile(results.uri, results.reference)
        ? `<button data-action="compare">Compare with reference</button>`
        : "";
    const addReference =
      results.role === "candidate" && results.kernels.some((k) => k.side === "candidate")
        ? `<button data-action="addReferenceReport" title="Open an Nsight Compute report of the reference's Model">Add the reference's report…</button>`
        : "";
    const report = results.reportLabel ?? results.report;
    body =
      `<h1>Stitch results: ${esc(results.file)}</h1><p class="sub">${role}</p>` +
      `<p><button data-action="refresh">Refresh</button>${compare}${addReference}</p>` +
      `<h2>Attempts</h2>${attemptsTable(results.attempts)}${speedupBlock(results.attempts)}` +
      `<h2>Verify</h2>${verifyBlock(results.verify, results.role)}` +
      `<h2>Plan</h2>${planBlock(results.plan)}` +
      `<h2>Rubric</h2>${rubricBlock(results.attempts)}` +
      `<h2>Timeline (one forward)</h2>${timelineBlock(results)}` +
      `<h2>Roofline</h2>${rooflineBlock(results)}` +
      `<h2>Kernels (Nsight Compute)${results.profileStale ? " <span class=warn>(stale: file changed)</span>" : ""}</h2>` +
      (results.kernels.length > 0 ? sidesBlock(results.kernels) : "") +
      kernelsTable(results.kernels, results.profiler) +
      (report ? `<p class="source">Report: ${esc(report)}</p>` : "") +
      (results.notes.length > 0
        ? `<h2>Not shown</h2><ul>${results.notes.map((n) => `<li class="note">${esc(n)}</li>`).join("")}</ul>`
        : "");
  }
  return (
    `<!DOCTYPE html><html lang="en"><head><meta charset="UTF-8">` +
    `<meta http-equiv="Content-Security-Policy" content="${csp}">` +
    `<meta name="viewport" content="width=device-width, initial-scale=1.0">` +
    `<title>Stitch results</title><style nonce="${opts.nonce}">${STYLE}</style></head>` +
    `<body>${body}<script nonce="${opts.nonce}">${SCRIPT}</script></body></html>`
  );
}
