/**
 * The results panel's HTML: attempt history, verify result, roofline chart and kernel table.
 *
 * Pure string building, tested under node. The page loads nothing remote: one inline stylesheet
 * and one inline script, both allowed only by a fresh nonce in a strict Content-Security-Policy.
 * Colours come from VS Code's theme variables, so the page follows light, dark and high-contrast
 * themes. The script only posts messages back (refresh, compare, reveal a line).
 */

import type { AttemptRow, KernelRow, Results, VerifySummary } from "./model";
import { escapeXml as esc, renderRoofline } from "./roofline";

export interface PageOptions {
  nonce: string;
  /** The webview's `cspSource` (for nothing but completeness: the page loads no resources). */
  cspSource: string;
}

export type PanelMessage = { type: "refresh" } | { type: "compare" } | { type: "reveal"; line: number };

/** Messages from the page; anything else is ignored. */
export function parsePanelMessage(raw: unknown): PanelMessage | undefined {
  if (typeof raw !== "object" || raw === null) {
    return undefined;
  }
  const msg = raw as Record<string, unknown>;
  if (msg.type === "refresh" || msg.type === "compare") {
    return { type: msg.type };
  }
  if (msg.type === "reveal" && typeof msg.line === "number" && Number.isInteger(msg.line) && msg.line >= 1) {
    return { type: "reveal", line: msg.line };
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
`;

const SCRIPT = `
const vscode = acquireVsCodeApi();
document.querySelectorAll("[data-action]").forEach((el) =>
  el.addEventListener("click", () => vscode.postMessage({ type: el.dataset.action })));
document.querySelectorAll("[data-line]").forEach((el) =>
  el.addEventListener("click", () => vscode.postMessage({ type: "reveal", line: Number(el.dataset.line) })));
`;

function num(value: number | null | undefined, digits = 3, suffix = ""): string {
  if (typeof value !== "number" || !Number.isFinite(value)) {
    return "–";
  }
  return `${Number(value.toPrecision(digits)).toLocaleString("en-US")}${suffix}`;
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

function kernelsTable(kernels: KernelRow[]): string {
  if (kernels.length === 0) {
    return `<p class="note">Not profiled yet. Run <b>Profile with Nsight Compute</b> (needs a GPU and ncu).</p>`;
  }
  const head =
    "<tr><th>#</th><th class=text>side</th><th class=text>kernel</th><th>time µs</th><th>SM %</th>" +
    "<th>memory %</th><th>DRAM GB/s</th><th>occupancy %</th><th>regs</th><th>block</th><th>grid</th>" +
    "<th class=text>bound</th><th>FLOP/byte</th><th>GFLOP/s</th></tr>";
  const body = kernels
    .map((k, i) => {
      const name =
        typeof k.line === "number"
          ? `<a class="line" data-line="${k.line}" title="line ${k.line}">${esc(k.name)}</a>`
          : esc(k.name);
      const side =
        k.side === "candidate"
          ? `<span class=swatch-c>●</span> candidate`
          : `<span class=swatch-r>□</span> reference`;
      return (
        `<tr><td>${i + 1}</td><td class=text>${side}</td><td class=text>${name}</td>` +
        `<td>${num(k.durationUs)}</td><td>${num(k.smPct, 3)}</td><td>${num(k.memoryPct, 3)}</td>` +
        `<td>${num(k.dramGbS, 4)}</td><td>${num(k.occupancyPct, 3)}</td><td>${k.registers ?? "–"}</td>` +
        `<td>${k.block ?? "–"}</td><td>${k.grid ?? "–"}</td><td class=text>${esc(k.bottleneck)}</td>` +
        `<td>${num(k.arithmeticIntensity)}</td><td>${num(k.gflops, 4)}</td></tr>`
      );
    })
    .join("");
  return `<table>${head}${body}</table>`;
}

function rooflineBlock(results: Results): string {
  if (!results.roofs) {
    return `<p class="note">No roofs known for this GPU.</p>`;
  }
  const chart = renderRoofline(results.roofs, results.kernels);
  const source =
    results.roofs.source === "ncu"
      ? `Roofs measured by Nsight Compute${results.roofs.gpu ? ` on ${esc(results.roofs.gpu)}` : ""}.`
      : `No ncu roofline metrics yet: roofs of ${esc(results.roofs.source)}.`;
  const missing =
    chart.missing.length > 0
      ? ` Not on the chart (no roofline metrics in the report): ${chart.missing.map((k) => esc(k.name)).join(", ")}.`
      : "";
  return `<div class="chart">${chart.svg}</div><p class="source">${source}${missing}</p>`;
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
        ? `CUDA implementation${results.reference ? ` of ${esc(results.reference)}` : ""}`
        : results.role === "reference"
          ? "reference (KernelBench Model)"
          : "no Model or ModelNew here";
    // A file that holds both Model and ModelNew is its own reference: nothing to compare.
    const compare =
      results.role === "candidate" && results.reference && !sameFile(results.uri, results.reference)
        ? `<button data-action="compare">Compare with reference</button>`
        : "";
    body =
      `<h1>Stitch results: ${esc(results.file)}</h1><p class="sub">${role}</p>` +
      `<p><button data-action="refresh">Refresh</button>${compare}</p>` +
      `<h2>Attempts</h2>${attemptsTable(results.attempts)}` +
      `<h2>Verify</h2>${verifyBlock(results.verify, results.role)}` +
      `<h2>Roofline</h2>${rooflineBlock(results)}` +
      `<h2>Kernels (Nsight Compute)${results.profileStale ? " <span class=warn>(stale: file changed)</span>" : ""}</h2>` +
      kernelsTable(results.kernels) +
      (results.report ? `<p class="source">Report: ${esc(results.report)}</p>` : "") +
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
