/**
 * Cancel from VS Code, through the real vscode-languageclient and the real server: a Generate whose
 * worker hangs shows its progress as a notification with a Cancel button (not in the status bar);
 * the jobs view receives the job; Cancel ends it and its worker's process group, and nothing is
 * written. Only `vscode` is fake; the worker Python is a shell script that never finishes.
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

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(" ")[2] !== "Z";
  } catch {
    return false;
  }
}

describe("cancelling a job from VS Code", { timeout: 90_000, skip: process.platform === "win32" }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stitch-cancel-"));
  const model = path.join(dir, "model.py");
  fs.copyFileSync(path.join(FIXTURES, "model.py"), model);
  const pids = path.join(dir, "worker.pids");
  const slowPython = path.join(dir, "slow-python");
  // It answers the worker launcher's version probe, then hangs as a worker.
  fs.writeFileSync(
    slowPython,
    `#!/bin/sh\ncase "$*" in *version_info*) echo True; exit 0;; *find_spec*) exit 0;; esac\n` +
      `echo $$ >> "${pids}"\nsleep 300 &\necho $! >> "${pids}"\nwait\n`,
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
    await until(
      "the worker",
      () => fs.existsSync(pids) && fs.readFileSync(pids, "utf8").trim().split("\n").length >= 2,
      fake,
    );
    await until("the progress notification", () => fake.progress.length > 0, fake);
    const [shown] = fake.progress;
    assert.equal(shown.location, NOTIFICATION, "progress belongs in a notification, not the status bar");
    assert.ok(shown.cancellable);
    assert.match(shown.title, /generating CUDA for model\.py/);
    await until("the stage", () => shown.reports.some((r) => r.message === "Planning"), fake);

    shown.cancel();
    await run;
    await until("the job's end", () => shown.done, fake);
    const [worker, child] = fs.readFileSync(pids, "utf8").trim().split("\n").map(Number);
    await until("the worker group's end", () => !alive(worker) && !alive(child), fake);
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
