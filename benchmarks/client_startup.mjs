// How long the VS Code extension takes to get the server ready, measured through the bundled
// extension (its real vscode-languageclient) with only the `vscode` module faked:
//   probe     `python -c "import stitch_lsp"` (the extension's check before launching)
//   activate  activate() -> the server's first stitch/status shown in the status bar
//   restart   a server setting changes -> the new server's first stitch/status (includes the
//             client's 500 ms quiet period that merges a burst of setting changes)
// Usage: (cd client-vscode && npm run pretest) && node benchmarks/client_startup.mjs [--runs N]
import { createRequire } from "node:module";
import * as path from "node:path";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "client-vscode", "out");
const { makeFakeVscode } = require(path.join(root, "test/support/fakeVscode.js"));
const { context, loadBundle } = require(path.join(root, "test/support/bundle.js"));
const { FIXTURES, testPython } = require(path.join(root, "test/e2e/session.js"));
const { nodeRunner } = require(path.join(root, "src/processRunner.js"));
const { probeLaunch } = require(path.join(root, "src/serverLaunch.js"));

// vscode-languageclient can reject a pending request internally when a server process dies
// mid-start; report it rather than abort the measurement.
process.on("unhandledRejection", (e) => console.error(`unhandled rejection: ${e?.message ?? e}`));
const runs = Number(process.argv[process.argv.indexOf("--runs") + 1]) || 5;
const python = testPython();

async function waitFor(ready, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 5));
  }
}

const times = { probe: [], activate: [], restart: [] };
for (let i = 0; i < runs; i++) {
  let t = performance.now();
  const probe = await nodeRunner.run(
    probeLaunch({ command: [python], source: "setting", description: "" }, { cwd: FIXTURES, env: process.env }),
    60_000,
  );
  if (probe.code !== 0) throw new Error(`probe failed: ${probe.stderr}`);
  times.probe.push(performance.now() - t);

  const fake = makeFakeVscode({ settings: { "python.interpreter": [python] }, workspaceFolder: FIXTURES });
  const loaded = loadBundle(fake);
  const ready = () => /stitch-lsp ready/.test(String(fake.statusItem.tooltip));
  t = performance.now();
  await loaded.extension.activate(context());
  await waitFor(ready);
  times.activate.push(performance.now() - t);

  fake.statusItem.tooltip = "";
  fake.settings.llmModel = `model-${i}`;
  t = performance.now();
  fake.configuration.fire({ affectsConfiguration: (s) => s === "stitch.llmModel" });
  await waitFor(ready);
  times.restart.push(performance.now() - t);
  await loaded.extension.deactivate();
  loaded.restore();
}

const stat = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { median: s[Math.floor(s.length / 2)], min: s[0], max: s.at(-1) };
};
console.log(`python: ${python}; runs: ${runs}`);
for (const [name, xs] of Object.entries(times)) {
  const { median, min, max } = stat(xs);
  console.log(`${name.padEnd(9)} median ${median.toFixed(0)} ms  (min ${min.toFixed(0)}, max ${max.toFixed(0)})`);
}
