// Drives a running code-server (with the Stitch .vsix installed) through headless Chromium, as a
// user would: open a reference, see stitch diagnostics in Problems, run Generate (compile-only,
// no GPU here), watch the new file open, open the results panel, show an Nsight Compute report
// and its roofline. Saves a screenshot per step and prints one JSON line of what it saw.
//
//   node drive.mjs URL WORKSPACE OUT_DIR REPORT_PATH
//
// playwright-core comes from $STITCH_E2E_TOOLS (installed by install-tools.sh); Chromium is
// Debian's (/usr/bin/chromium, or $STITCH_CHROMIUM).
import { mkdtempSync, mkdirSync, writeFileSync, existsSync } from "node:fs";
import { createRequire } from "node:module";
import * as os from "node:os";
import * as path from "node:path";

const [url, workspace, outDir, report] = process.argv.slice(2);
const tools = process.env.STITCH_E2E_TOOLS;
const require = createRequire(path.join(tools, "package.json"));
const { chromium } = require("playwright-core");

const seen = { steps: [] };
mkdirSync(outDir, { recursive: true });
const slow = Number(process.env.STITCH_E2E_TIMEOUT_SCALE ?? "1");
const T = (ms) => ms * slow;

// A fresh profile: launchPersistentContext takes the --user-data-dir itself.
const browser = await chromium.launchPersistentContext(
  mkdtempSync(path.join(os.tmpdir(), "stitch-chromium-")),
  {
    executablePath: process.env.STITCH_CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1600, height: 1000 },
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  },
);
const page = browser.pages()[0] ?? (await browser.newPage());
page.setDefaultTimeout(T(60_000));

async function shot(name) {
  const file = path.join(outDir, `${name}.png`);
  await page.screenshot({ path: file });
  seen.steps.push(name);
  return file;
}

async function palette(command) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  await input.fill(`>${command}`);
  const item = page.locator(".quick-input-list .monaco-list-row", { hasText: command }).first();
  await item.waitFor({ state: "visible", timeout: T(30_000) });
  await page.keyboard.press("Enter");
}

async function openFile(name) {
  // From the Explorer, as a user would: a double click opens it pinned, with the focus in it.
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: name }).first().dblclick();
  await page.locator(`.tab.active[aria-label^="${name}"]`).first().waitFor();
  await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
}

function resultsFrame() {
  return page.frameLocator("iframe.webview.ready").last().frameLocator("#active-frame");
}

let failure;
try {
  await page.goto(`${url}/?folder=${encodeURIComponent(workspace)}`);
  await page.locator(".monaco-workbench").waitFor({ timeout: T(120_000) });
  await page.locator(".statusbar").waitFor();

  // 1. The reference, then a candidate that would not count: stitch diagnostics in Problems.
  await openFile("layernorm_gelu.py");
  await page
    .locator(".statusbar-item", { hasText: "Stitch" })
    .first()
    .waitFor({ timeout: T(120_000) });
  // The server is up once its lens shows on `class Model`.
  await page
    .locator(".codelens-decoration", { hasText: "Generate fused CUDA implementation" })
    .first()
    .waitFor({ timeout: T(120_000) });
  // No GPU and no ncu here: nothing offers a profile that cannot run.
  seen.referenceLenses = await page.locator(".codelens-decoration").allInnerTexts();
  await openFile("model_new_fallback.py");
  await page.keyboard.press("Control+Shift+M");
  const problem = page.locator(".markers-panel .monaco-list-row", { hasText: "falls back" }).first();
  await problem.waitFor({ timeout: T(60_000) });
  seen.problems = await page.locator(".markers-panel .monaco-list-row").allInnerTexts();
  await shot("1-diagnostics");

  // 2. Generate (compile-only: no GPU here) from the palette on the reference: its progress is a
  //    notification with a Cancel button, and the job is listed in the Stitch jobs view.
  const jobsHeader = page.locator(".pane-header", { hasText: /Stitch jobs/i }).first();
  if ((await jobsHeader.getAttribute("aria-expanded")) !== "true") {
    await jobsHeader.click();
  }
  await openFile("layernorm_gelu.py");
  await palette("Stitch: Generate Fused CUDA Implementation");
  const toast = page
    .locator(".notification-toast", { hasText: "generating CUDA for layernorm_gelu.py" })
    .first();
  await toast.waitFor({ timeout: T(60_000) });
  seen.progressCancellable = (await toast.locator(".monaco-button", { hasText: "Cancel" }).count()) > 0;
  await page
    .locator(".monaco-list-row", { hasText: "generate layernorm_gelu.py" })
    .first()
    .waitFor({ timeout: T(60_000) });
  seen.jobRow = await page
    .locator(".monaco-list-row", { hasText: "generate layernorm_gelu.py" })
    .first()
    .innerText();
  // The job's stage and elapsed time, and its device, are rows of their own: each must be
  // shown whole in the sidebar (no label cut with an ellipsis).
  const jobsPane = page.locator(".pane", { has: jobsHeader });
  const jobRows = jobsPane.locator(".monaco-list-row");
  await page.waitForFunction(
    () => [...document.querySelectorAll(".pane .monaco-list-row")].some((r) => /\d:\d\d/.test(r.innerText)),
    null,
    { timeout: T(30_000) },
  );
  // A row's label and description as the eye reads them, a space apart (innerText runs the
  // two spans together).
  seen.jobRows = await jobRows.evaluateAll((rows) =>
    rows.map(
      (r) =>
        [...r.querySelectorAll(".label-name, .label-description")]
          .map((e) => e.textContent.trim())
          .filter(Boolean)
          .join(" ") || r.innerText,
    ),
  );
  seen.jobRowsCut = await jobRows.evaluateAll((rows) =>
    rows
      .filter((r) =>
        [...r.querySelectorAll(".label-name, .label-description")].some(
          (e) => e.scrollWidth > e.clientWidth + 1,
        ),
      )
      .map((r) => r.innerText),
  );
  await shot("2-generating");
  await page
    .locator('.tab[aria-label^="layernorm_gelu_stitch.py"]')
    .first()
    .waitFor({ timeout: T(300_000) });
  await page
    .locator(".monaco-editor .view-lines", { hasText: "stitch-lsp: reference=layernorm_gelu.py" })
    .first()
    .waitFor();
  seen.generated = existsSync(path.join(workspace, "layernorm_gelu_stitch.py"));
  // The finished notification: the verdict first, short enough to be read whole.
  const finished = page.locator(".notification-toast", { hasText: "NOT verified" }).first();
  await finished.waitFor({ timeout: T(30_000) });
  seen.finishedToast = await finished.locator(".notification-list-item-message").first().innerText();
  seen.finishedToastCut = await finished
    .locator(".notification-list-item-message")
    .first()
    .evaluate((e) => e.scrollWidth > e.clientWidth + 1);
  await palette("View: Hide Panel"); // room for the new file
  await page.locator(".quick-input-widget").waitFor({ state: "hidden" }); // not caught closing
  await shot("3-generated-file");

  // 3. The results panel of the generated file: attempts, verify state, roofline.
  // The server offers the panel as a lens on ModelNew (further down, so not in view).
  await page
    .locator(".codelens-decoration", { hasText: "Show results" })
    .first()
    .waitFor({ state: "attached", timeout: T(60_000) });
  await palette("Stitch: Show Results");
  const frame = resultsFrame();
  await frame.locator("h1", { hasText: "layernorm_gelu_stitch.py" }).waitFor({ timeout: T(60_000) });
  await frame.locator("svg.roofline polyline.roof").waitFor();
  await frame
    .locator("table.plan-groups a.line")
    .first()
    .waitFor({ timeout: T(30_000) });
  seen.generatedResults = await frame.locator("body").innerText();
  seen.generatedRoofLabel = await frame.locator("svg.roofline text.roof-label").allTextContents();
  seen.planLines = await frame.locator("table.plan-groups a.line").allInnerTexts();
  seen.generatedCharts = {
    timeline: await frame.locator("svg.timeline").count(),
    speedups: await frame.locator("svg.speedups").count(),
  };
  // Opening the panel put the notifications away: nothing covers it.
  await page.waitForTimeout(500);
  seen.toastsOverResults = await page.locator(".notification-toast").count();
  // The plan's and the rubric's sentences wrap: the page is no wider than the panel.
  seen.generatedPageOverflow = await frame
    .locator("body")
    .evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
  await shot("4-results-generated");
  await frame.locator("h2", { hasText: "Plan" }).scrollIntoViewIfNeeded();
  await frame.locator("h2", { hasText: "Plan" }).evaluate((e) => e.scrollIntoView({ block: "start" }));
  await shot("4b-results-plan-rubric");

  // 4. A real Nsight Compute report on relu_bias_inline.py: its kernel on the roofline.
  await openFile("relu_bias_inline.py");
  await palette("Stitch: Show Nsight Compute Report…");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible" });
  // VS Code's simple file dialog lists the folder asynchronously and, when that listing lands
  // after the path was typed, it resets the box to the folder: Enter then opens the folder and
  // the dialog stays. Type the path again until the dialog accepts the file (seen under load).
  const widget = page.locator(".quick-input-widget");
  // Under load the listing can land more than once: wait until the typed path has stood for a
  // moment before pressing Enter.
  for (let attempt = 1; ; attempt++) {
    await input.fill(report);
    await page.waitForTimeout(T(attempt * 500));
    if ((await input.inputValue()) !== report && attempt < 5) continue;
    await page.keyboard.press("Enter");
    try {
      await widget.waitFor({ state: "hidden", timeout: T(attempt < 5 ? 15_000 : 60_000) });
      break;
    } catch (err) {
      if (attempt >= 5) throw err;
    }
  }
  await palette("Stitch: Show Results");
  const frame2 = resultsFrame();
  await frame2.locator("h1", { hasText: "relu_bias_inline.py" }).waitFor({ timeout: T(60_000) });
  // Reading the report is a background job: refresh until its kernel is on the chart.
  const point = frame2.locator("svg.roofline g.kernel circle.point.candidate");
  for (let i = 0; i < 30 && (await point.count()) === 0; i++) {
    await page.waitForTimeout(1000);
    await frame2.locator("button[data-action=refresh]").click();
  }
  // A job that lands late (the report read, a refresh) sets the panel's HTML again, which
  // replaces the webview's frame under a read in flight: read the whole page again then.
  for (let attempt = 1; ; attempt++) {
    try {
      await point.first().waitFor({ timeout: T(10_000) });
      seen.profiledResults = await frame2.locator("body").innerText();
      seen.profiledRoofLabel = await frame2.locator("svg.roofline text.roof-label").allTextContents();
      seen.addReferenceButton = await frame2.locator("button[data-action=addReferenceReport]").count();
      // The kernel table scrolls inside its container; the page itself never gets wider.
      seen.pageOverflow = await frame2
        .locator("body")
        .evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
      seen.tableScrolls = await frame2
        .locator("div.scroll")
        .first()
        .evaluate((e) => getComputedStyle(e).overflowX);
      // ... and at this size it needs no scrolling: every column is in view.
      seen.tableHidden = await frame2
        .locator("div.scroll")
        .first()
        .evaluate((e) => e.scrollWidth - e.clientWidth);
      break;
    } catch (err) {
      if (attempt >= 4 || !/detached|destroyed|closed/i.test(String(err))) throw err;
      await page.waitForTimeout(1000);
    }
  }
  seen.toastsOverProfiled = await page.locator(".notification-toast").count();
  await shot("5-results-roofline");
  // Sortable: a click on "time µs" sorts by it, ascending, then descending.
  const timeHead = frame2.locator("table.kernels th", { hasText: "time µs" });
  await timeHead.evaluate((e) => e.scrollIntoView({ block: "start" }));
  await timeHead.click();
  seen.sortFirst = await timeHead.getAttribute("aria-sort");
  await timeHead.click();
  seen.sortSecond = await timeHead.getAttribute("aria-sort");
  await shot("5b-kernel-table");

  // 5. Compare the generated file with its reference, side by side.
  await openFile("layernorm_gelu_stitch.py");
  await palette("View: Close Editors in Other Groups"); // the results panel: room for the diff
  await palette("Stitch: Compare with Reference");
  await page
    .locator(".monaco-diff-editor .view-line", { hasText: "class Model" })
    .first()
    .waitFor({ timeout: T(60_000) });
  await page
    .locator(".tab.active", { hasText: "layernorm_gelu.py ↔ layernorm_gelu_stitch.py" })
    .first()
    .waitFor();
  await shot("6-compare");
} catch (err) {
  failure = String(err?.stack ?? err);
  try {
    await shot("failure");
  } catch {}
}
await browser.close();
if (failure) {
  seen.error = failure;
}
console.log(`E2E_RESULT ${JSON.stringify(seen)}`);
process.exit(failure ? 1 : 0);
