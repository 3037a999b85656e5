/**
 * Cancel from VS Code, through the real vscode-languageclient and the real server: a Generate whose
 * worker hangs shows its progress as a notification with a Cancel button (not in the status bar);
 * the jobs view receives the job; Cancel ends it and its worker's process group, and nothing is
 * written. Only `vscode` is fake; the worker Python is a shell script that never finishes.
 * The worker may run in the sandbox's own pid namespace, so its processes are found on this side
 * by a marker in their command lines, not by pids it reports.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { context, loadBundle, until } from "../support/bundle";
import { fakeDocument, makeFakeVscode } from "../support/fakeVscode";
import { FIXTURES, testPython } from "./session";

const NOTIFICATION = 15; // vscode.ProgressLocation.Notification

/** Live processes whose command line names `marker` (zombies are already gone). */
function processesNaming(marker: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const cmdline = fs.readFileSync(`/proc/${entry}/cmdline`, "utf8");
      const state = fs.readFileSync(`/proc/${entry}/stat`, "utf8").split(") ").pop()?.[0];
      if (cmdline.includes(marker) && state !== "Z") found.push(Number(entry));
    } catch {
      // it ended while we looked
    }
  }
  return found;
}

describe("cancelling a job from VS Code", { timeout: 90_000, skip: process.platform === "win32" }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stitch-cancel-"));
  const model = path.join(dir, "model.py");
  fs.copyFileSync(path.join(FIXTURES, "model.py"), model);
  const slowPython = path.join(dir, "slow-python");
  const child = path.join(dir, "worker-child");
  // It answers the launcher's probes (version, import folders, torch), then hangs as a worker
  // with a child of its own.
  fs.writeFileSync(
    slowPython,
    `#!/bin/sh\ncase "$*" in *version_info*) echo True; exit 0;; *interpreter_paths*) echo '[]'; exit 0;;` +
      ` *find_spec*) exit 0;; esac\nsh -c 'sleep 300; :' "${child}" &\nwait\n`,
  );
  fs.chmodSync(slowPython, 0o755);
  const text = fs.readFileSync(model, "utf8");
  const fake = makeFakeVscode({
    settings: { "python.interpreter": [testPython()], pythonForWorkers: slowPython, coder: "builtin" },
    workspaceFolder: dir,
    documents: [fakeDocument(model, "python", text)],
    cursor: { line: text.split("\n").findIndex((l) => l.startsWith("class Model")) + 1, character: 4 },
  });
  let loaded: ReturnType<typeof loadBundle>;

  before(() => {
    loaded = loadBundle(fake);
  });

  after(async () => {
    await loaded.extension.deactivate();
    loaded.restore();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("shows a cancellable notification, and Cancel kills the worker group and writes nothing", async () => {
    await loaded.extension.activate(context());
    await until("the server", () => /stitch-lsp ready/.test(String(fake.statusItem.tooltip)), fake);
    const run = fake.registered.get("stitch.generateFusedImplementation")!() as Promise<unknown>;
    await until("the worker and its child", () => processesNaming(child).length > 0, fake);
    await until("the progress notification", () => fake.progress.length > 0, fake);
    const [shown] = fake.progress;
    assert.equal(shown.location, NOTIFICATION, "progress belongs in a notification, not the status bar");
    assert.ok(shown.cancellable);
    assert.match(shown.title, /generating CUDA for model\.py/);
    await until("the stage", () => shown.reports.some((r) => r.message === "Planning"), fake);

    shown.cancel();
    await run;
    await until("the job's end", () => shown.done, fake);
    // The worker, its child, and the sandbox around them all name the job's folder or script.
    await until("the worker group's end", () => processesNaming(dir).length === 0, fake);
    const returned = fake.output.find((l) => l.includes("stitch.generate returned"));
    assert.ok(returned, fake.output.join("\n"));
    assert.match(returned, /"state":"cancelled"/);
    assert.deepEqual(
      fs.readdirSync(dir).filter((f) => f.endsWith(".py")),
      ["model.py"],
      "a cancelled Generate wrote a file",
    );
  });
});
