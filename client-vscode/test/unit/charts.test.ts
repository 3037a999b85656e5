import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { JobsModel } from "../../src/jobs";
import { niceStep, renderSpeedups, renderTimeline, timelineSegments } from "../../src/results/charts";
import { parseResults, type Timeline } from "../../src/results/model";
import { resultsPage } from "../../src/results/page";

const OPTS = { nonce: "bm9uY2U=", cspSource: "vscode-webview://abc" };

/** The verifier's timeline of a reference, recorded on the H200 (see the fixture's `source`). */
const RECORDED = JSON.parse(
  fs.readFileSync(path.join(__dirname, "..", "..", "..", "test", "fixtures", "timeline-h200.json"), "utf8"),
);

/** snake_case (as recorded) to the wire's camelCase. */
function camel(value: unknown): unknown {
  if (Array.isArray(value)) {
    return value.map(camel);
  }
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => [
        k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase()),
        camel(v),
      ]),
    );
  }
  return value;
}

const REFERENCE_TIMELINE = camel(RECORDED.reference) as Timeline;

/** What the server answers after a compile-only Generate: a plan, a rubric, nothing timed. */
const COMPILE_ONLY = {
  uri: "file:///w/examples/layernorm_gelu_stitch.py",
  file: "layernorm_gelu_stitch.py",
  role: "candidate",
  reference: "/w/examples/layernorm_gelu.py",
  referenceLabel: "layernorm_gelu.py",
  attempts: [
    {
      runId: "20261204T231833-ac2f0c64",
      attempt: 1,
      stage: "draft",
      status: "compiled",
      rubric: 19,
      accepted: true,
      thisFile: true,
      message: "compile-only run requested: built; correctness and timing need a GPU",
      rubricItems: [
        { name: "anti_hacking", score: 4, reasons: ["clean under the static checks; not run on a GPU"] },
        { name: "engineering", score: 5, reasons: ["uses shared-memory tiles"] },
        {
          name: "coverage",
          score: 5,
          reasons: ["1 CUDA kernel(s); no torch compute operators in the Python code"],
        },
        { name: "compliance", score: 5, reasons: ["1 kernel(s) for 1 planned fusion group(s)"] },
      ],
    },
  ],
  verify: null,
  kernels: [],
  roofs: {
    peakGflops: 67000,
    peakGbS: 4120,
    source: "no GPU here: assumed H200 (measured bandwidth; datasheet FLOP/s)",
  },
  plan: {
    runId: "20261204T231833-ac2f0c64",
    revision: 0,
    summary: "1 fused kernel(s) for Model on H200: fused floor 0.033 ms vs unfused 0.098 ms.",
    groups: [
      {
        name: "k1",
        ops: ["norm", "gelu", "mul"],
        lines: [18, 19, 20],
        rationale: "memory-bound: one read and one write of each tensor is the floor",
      },
    ],
    steps: ["Kernel k1 (norm, gelu, mul): one pass over memory"],
    risks: ["GELU: match the reference's variant (erf or tanh approximation)"],
  },
  profiler: "no CUDA GPU here",
  profileStale: false,
  notes: [],
};

describe("timeline picture", () => {
  it("splits the recorded H200 forward into its kernels and the idle time, summing to the window", () => {
    const segs = timelineSegments(REFERENCE_TIMELINE);
    const total = segs.reduce((s, x) => s + x.ms, 0);
    assert.ok(Math.abs(total - REFERENCE_TIMELINE.windowMs) < 1e-9);
    assert.deepEqual(
      segs.map((s) => s.kind),
      ["kernel", "kernel", "idle"],
    );
    const idle = segs[2].ms;
    assert.ok(Math.abs(idle - (0.11920966666666667 - 0.06553566666666666)) < 1e-12, "idle = window - busy");
  });

  it("draws reference and candidate on one time axis, gaps dashed, and nothing without data", () => {
    const candidate: Timeline = {
      ...REFERENCE_TIMELINE,
      kernels: 1,
      windowMs: 0.04,
      busyMs: 0.035,
      busyFraction: 0.875,
      gaps: 1,
      gapMs: 0.005,
      maxGapMs: 0.005,
      top: [{ name: "stitch_fused_0", ms: 0.035, calls: 1, share: 1 }],
    };
    const svg = renderTimeline([
      { label: "reference", timeline: REFERENCE_TIMELINE },
      { label: "candidate", timeline: candidate },
    ])!;
    assert.match(svg, /class="timeline"/);
    assert.equal((svg.match(/class="seg idle"/g) ?? []).length, 2);
    assert.match(svg, />reference<\/text>/);
    assert.match(svg, /idle 0\.0537 ms \(45% of the window\): 2\.67 gaps, longest 0\.0962 ms/);
    assert.match(svg, /ms per forward/);
    assert.equal(renderTimeline([]), undefined);
    assert.equal(niceStep(0.119), 0.05);
    assert.equal(niceStep(4), 1);
  });

  it("the panel shows the recorded timeline and says which side has none", () => {
    const results = parseResults({
      ...COMPILE_ONLY,
      verify: {
        status: "passed",
        title: "passed",
        stale: false,
        compileOnly: false,
        gpu: "NVIDIA H200",
        timeline: { reference: RECORDED.reference && camel(RECORDED.reference), candidate: null, note: null },
      },
    });
    const html = resultsPage(results, OPTS);
    assert.match(html, /<svg[^>]*class="timeline"/);
    assert.match(html, /reference: 2 kernel launches, GPU busy 55% of 0\.119 ms/);
    assert.match(html, /No timeline for the candidate/);
    assert.match(html, /not each launch&#39;s start|not each launch's start/);
  });
});

describe("speedup per attempt", () => {
  it("plots measured speedups with the 1x line, and marks untimed attempts without a value", () => {
    const rows = [
      {
        runId: "r",
        attempt: 1,
        stage: "draft",
        status: "incorrect",
        accepted: false,
        thisFile: false,
        message: "",
      },
      {
        runId: "r",
        attempt: 2,
        stage: "repair_correctness",
        status: "passed",
        speedupVsEager: 1.42,
        correct: true,
        accepted: true,
        thisFile: true,
        message: "",
      },
      {
        runId: "r",
        attempt: 3,
        stage: "optimize",
        status: "passed",
        speedupVsEager: 1.9,
        accepted: false,
        thisFile: false,
        message: "",
      },
    ];
    const svg = renderSpeedups(rows)!;
    assert.equal((svg.match(/<circle class="point"/g) ?? []).length, 2);
    assert.match(svg, /attempt 1 \(draft\): incorrect, not timed/);
    assert.match(svg, /attempt 3 \(optimize\): 1\.9x over eager/);
    assert.match(svg, /class="parity"/);
    assert.equal(renderSpeedups([rows[0]]), undefined, "nothing timed: no chart");
  });
});

describe("the panel after a compile-only generate", () => {
  const html = resultsPage(parseResults(COMPILE_ONLY), OPTS);

  it("shows the plan's fusion groups with links to their reference lines", () => {
    assert.match(html, /<h2>Plan<\/h2><p>1 fused kernel\(s\) for Model on H200/);
    assert.match(html, /<td class=text>k1<\/td>/);
    for (const [op, line] of [
      ["norm", 18],
      ["gelu", 19],
      ["mul", 20],
    ]) {
      assert.match(html, new RegExp(`${op} <a class="line" data-line="${line}" data-target="reference"`));
    }
    assert.match(html, /Correctness risks/);
  });

  it("shows the rubric items with their reasons", () => {
    assert.match(html, /Attempt 1 \(draft\): 19\/20/);
    assert.match(html, /<th class=text>anti-hacking<\/th><td>4\/5<\/td>/);
    assert.match(html, /<li>clean under the static checks; not run on a GPU<\/li>/);
    assert.match(html, /<th class=text>compliance<\/th><td>5\/5<\/td>/);
  });

  it("says plainly that nothing was timed, and draws no timing", () => {
    assert.match(html, /No timing: no attempt was timed on a GPU/);
    assert.match(html, /No timing: not verified in this session/);
    assert.doesNotMatch(html, /class="timeline"|class="speedups"/);
    assert.match(html, /It cannot run here: no CUDA GPU here/);
  });
});

describe("kernel table", () => {
  const kernels = [
    { name: "bias_relu_kernel", side: "candidate", durationUs: 56.3, bottleneck: "memory", registers: 16 },
    {
      name: "ampere_sgemm_128x64_tn",
      side: "reference",
      durationUs: 2700,
      bottleneck: "compute",
      registers: 122,
    },
    { name: "vectorized_elementwise_kernel", side: "reference", durationUs: 60.1, bottleneck: "memory" },
  ];
  const html = resultsPage(parseResults({ ...COMPILE_ONLY, kernels, profiler: null }), OPTS);

  it("scrolls inside its container and sorts by any column", () => {
    assert.match(html, /<div class="scroll"><table class="sortable kernels"><thead>/);
    assert.match(html, /\.scroll \{ max-width: 100%; overflow-x: auto; \}/);
    assert.equal((html.match(/<th class="sort/g) ?? []).length, 13); // grid × block is one
    assert.match(html, /<td data-v="2700">2,700<\/td>/, "numbers carry their value for sorting");
    assert.match(html, /<td data-v="">–<\/td>/, "a blank sorts last");
    assert.match(html, /table\.sortable/, "the page's script sorts");
  });

  it("puts the reference beside the candidate", () => {
    assert.match(
      html,
      /<div class="pair sides"><div><h3>reference<\/h3><table><tr><th class=text>kernels<\/th><td>2<\/td>/,
    );
    assert.match(html, /GPU time<\/th><td>2,760 µs/);
    assert.match(html, /<h3>candidate<\/h3><table><tr><th class=text>kernels<\/th><td>1<\/td>/);
  });

  it("offers the reference's report when only the candidate was profiled", () => {
    const one = resultsPage(parseResults({ ...COMPILE_ONLY, kernels: [kernels[0]], profiler: null }), OPTS);
    assert.match(one, /data-action="addReferenceReport"/);
    assert.match(one, /The reference's kernels are not on the chart: it was not profiled/);
    assert.doesNotMatch(html, /The reference's kernels are not on the chart/);
  });
});

describe("jobs view rows", () => {
  it("gives the stage with its elapsed time, and the device, rows of their own", () => {
    const model = new JobsModel(() => 10_000);
    model.update({
      jobs: [
        {
          id: 1,
          kind: "generate",
          title: "stitch: generating CUDA for layernorm_gelu.py",
          file: "layernorm_gelu.py",
          device: null,
          state: "running",
          stage: "Planning",
          submittedAt: 1,
          elapsedS: 12,
        },
      ],
    });
    assert.deepEqual(model.details(model.jobs[0]), [
      { key: "stage", label: "Planning", description: "0:12" },
      { key: "device", label: "on CPU", description: "" },
    ]);
  });
});
