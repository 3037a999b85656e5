import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseResults } from "../../src/results/model";
import { contentSecurityPolicy, parsePanelMessage, resultsPage } from "../../src/results/page";

const OPTS = { nonce: "bm9uY2U=", cspSource: "vscode-webview://abc" };

const RESULTS = {
  uri: "file:///w/ex/layernorm_gelu_stitch.py",
  file: "layernorm_gelu_stitch.py",
  role: "candidate",
  reference: "/w/ex/layernorm_gelu.py",
  attempts: [
    {
      runId: "20261203T071353-6990102d",
      attempt: 1,
      stage: "draft",
      status: "compiled",
      rubric: 19,
      reward: null,
      correct: null,
      accepted: true,
      thisFile: true,
      created: "2026-12-03T07:13:59Z",
      message: "",
    },
  ],
  verify: null,
  kernels: [
    {
      name: "stitch_fused_0_kernel",
      side: "candidate",
      durationUs: 210.5,
      smPct: 30,
      memoryPct: 91,
      dramGbS: 4120,
      occupancyPct: 88,
      registers: 40,
      block: 256,
      grid: 1056,
      bottleneck: "memory",
      arithmeticIntensity: 0.9,
      gflops: 3700,
      line: 210,
    },
    {
      name: "vectorized_layer_norm_kernel",
      side: "reference",
      durationUs: 400,
      bottleneck: "memory",
      arithmeticIntensity: 0.6,
      gflops: 1500,
    },
  ],
  roofs: {
    peakGflops: 67000,
    peakGbS: 4120,
    source: "NVIDIA H200: measured bandwidth; datasheet FLOP/s",
    gpu: "NVIDIA H200",
    ncuPeakGbS: 4807.3,
  },
  profileStale: false,
  report: "/tmp/ncu-1/layernorm_gelu_stitch.ncu-rep",
  referenceLabel: "ex/layernorm_gelu.py",
  reportLabel: "profiles/layernorm_gelu_stitch.ncu-rep",
  notes: ["not verified in this session: run Verify against reference"],
};

describe("results panel HTML", () => {
  it("allows nothing but its own nonce'd style and script", () => {
    const csp = contentSecurityPolicy(OPTS);
    assert.match(csp, /^default-src 'none'/);
    assert.match(csp, /script-src 'nonce-bm9uY2U='/);
    assert.match(csp, /style-src 'nonce-bm9uY2U='/);
    assert.doesNotMatch(csp, /unsafe|https?:/);
    const html = resultsPage(parseResults(RESULTS), OPTS);
    assert.match(html, new RegExp(`<meta http-equiv="Content-Security-Policy" content="${csp}">`));
    const scripts = [...html.matchAll(/<script([^>]*)>/g)].map((m) => m[1]);
    assert.deepEqual(scripts, [` nonce="${OPTS.nonce}"`]);
    assert.doesNotMatch(html, /src="|href="http|@import|url\(/, "nothing remote");
  });

  it("shows the attempts, the verify state, the roofline and the kernel table", () => {
    const html = resultsPage(parseResults(RESULTS), OPTS);
    assert.match(html, /Stitch results: layernorm_gelu_stitch\.py/);
    assert.match(
      html,
      /CUDA implementation of ex\/layernorm_gelu\.py</,
      "the path as the workspace names it",
    );
    assert.match(html, /<td class=text>draft<\/td><td class="text warn">compiled<\/td>/);
    assert.match(html, /19\/20/);
    assert.match(html, /this file/);
    assert.match(html, /Not verified in this session/);
    assert.match(html, /<svg[^>]*class="roofline"/);
    // One roof everywhere: the measured H200 bandwidth, with ncu's nominal peak named as such.
    assert.match(html, /Roofs: NVIDIA H200: measured bandwidth; datasheet FLOP\/s \(DRAM 4,120 GB\/s/);
    assert.match(html, /DRAM 4,120 GB\/s<\/text>/);
    assert.doesNotMatch(html, /DRAM 4,8\d0 GB\/s<\/text>/);
    assert.match(html, /own DRAM peak, 4,810 GB\/s, is ncu's nominal figure/);
    assert.match(html, /data-line="210"[^>]*>stitch_fused_0_kernel</);
    assert.match(
      html,
      /title="reference" aria-label="reference">□<\/span><\/td><td class="text kname" data-v="vectorized_layer_norm_kernel">vectorized_layer_norm_kernel/,
    );
    // Launch shape in one column; long headers may break (the table fits a narrow panel).
    assert.match(html, /<td data-v="270336">1056×256<\/td>/);
    assert.match(html, /occu&shy;pancy %<\/th>/);
    assert.match(html, /data-action="compare"/);
    assert.match(html, /Report: profiles\/layernorm_gelu_stitch\.ncu-rep/);
    assert.doesNotMatch(html, /\/tmp\/ncu-1|\/w\/ex/, "no absolute path of the developer's machine");
  });

  it("uses only theme variables for colour", () => {
    const html = resultsPage(parseResults(RESULTS), OPTS);
    const style = html.match(/<style[^>]*>([\s\S]*)<\/style>/)![1];
    assert.doesNotMatch(style, /#[0-9a-fA-F]{3,6}\b|rgb\(/, "no hard-coded colours");
    assert.match(style, /var\(--vscode-charts-blue\)/);
  });

  it("says plainly what is missing, and escapes what it shows", () => {
    const html = resultsPage(
      parseResults({
        ...RESULTS,
        kernels: [],
        roofs: { peakGflops: 67000, peakGbS: 4120, source: "no GPU here: assumed H200" },
        file: "<b>.py",
        profiler: "no CUDA GPU here",
      }),
      OPTS,
    );
    assert.match(html, /Not profiled yet\. It cannot run here: no CUDA GPU here/);
    assert.match(html, /Roofs: no GPU here: assumed H200 \(DRAM 4,120 GB\/s/);
    assert.match(html, /&lt;b&gt;\.py/);
    assert.match(resultsPage(undefined, OPTS, "the server is not running"), /the server is not running/);
  });

  it("refuses malformed results and messages", () => {
    assert.equal(parseResults({ uri: 1 }), undefined);
    assert.equal(parseResults({ ...RESULTS, roofs: { peakGflops: 0, peakGbS: 1 } })!.roofs, null);
    assert.deepEqual(parsePanelMessage({ type: "reveal", line: 3 }), {
      type: "reveal",
      line: 3,
      target: "file",
    });
    assert.deepEqual(parsePanelMessage({ type: "reveal", line: 3, target: "reference" }), {
      type: "reveal",
      line: 3,
      target: "reference",
    });
    assert.deepEqual(parsePanelMessage({ type: "addReferenceReport" }), { type: "addReferenceReport" });
    assert.equal(parsePanelMessage({ type: "reveal", line: 0 }), undefined);
    assert.equal(parsePanelMessage({ type: "eval", code: "x" }), undefined);
  });
});

describe("the compare button", () => {
  it("is there for a generated file with a separate reference, not for a file that is its own pair", () => {
    const own = parseResults({ ...RESULTS, uri: "file:///w/ex/pair.py", reference: "/w/ex/pair.py" });
    assert.doesNotMatch(resultsPage(own, OPTS), /data-action="compare"/);
    assert.match(resultsPage(parseResults(RESULTS), OPTS), /data-action="compare"/);
  });
});
