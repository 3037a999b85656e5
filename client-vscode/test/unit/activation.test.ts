/**
 * Loads the packaged bundle (out/extension.js) against a fake `vscode` module and activates it:
 * catches a bundle that does not load, a contributed command that is not registered, and wiring
 * errors between VS Code's events and the controller.
 */

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { CLIENT_COMMANDS } from "../../src/controller";
import { context, loadBundle, until } from "../support/bundle";
import { EXTENSION_ROOT } from "../support/fakes";
import { FakeEmitter, makeFakeVscode } from "../support/fakeVscode";

describe("the packaged bundle, with no usable Python", () => {
  const fake = makeFakeVscode({
    settings: { "python.interpreter": ["/nonexistent/bin/python3"] },
    workspaceFolder: EXTENSION_ROOT,
  });
  const ctx = context();
  let loaded: ReturnType<typeof loadBundle>;

  before(() => {
    loaded = loadBundle(fake);
  });

  after(async () => {
    await loaded.extension.deactivate();
    loaded.restore();
  });

  it("activates, registers every contributed command, and reports the missing Python plainly", async () => {
    await loaded.extension.activate(ctx);
    assert.deepEqual([...fake.registered.keys()].sort(), [...CLIENT_COMMANDS].sort());
    await until("an error message", () => fake.messages.some((m) => m.level === "error"), fake);
    const error = fake.messages.find((m) => m.level === "error")!;
    assert.match(error.text, /Could not run \/nonexistent\/bin\/python3/);
    assert.deepEqual(error.actions, ["Open Settings", "Show Output"]);
    assert.equal(fake.statusItem.text, "$(error) Stitch");
    assert.ok(fake.statusItem.visible);
    assert.ok(ctx.subscriptions.length >= CLIENT_COMMANDS.length);
  });

  it("asks for an open file before running a palette command", async () => {
    await fake.registered.get("stitch.generateFusedImplementation")!();
    assert.match(fake.messages.at(-1)!.text, /open a Python or CUDA file/);
  });
});

describe("the packaged bundle, following the Python extension's interpreter", () => {
  let exe = "/envs/first/bin/python";
  const envChanged = new FakeEmitter();
  const python = {
    isActive: false,
    activate: async () => {
      python.isActive = true;
    },
    exports: {
      environments: {
        getActiveEnvironmentPath: () => ({ id: exe, path: exe }),
        resolveEnvironment: async () => ({ executable: { uri: { fsPath: exe } } }),
        onDidChangeActiveEnvironmentPath: envChanged.event,
      },
    },
  };
  const fake = makeFakeVscode({
    settings: {},
    workspaceFolder: EXTENSION_ROOT,
    extensions: { "ms-python.python": python },
  });
  let loaded: ReturnType<typeof loadBundle>;

  before(() => {
    loaded = loadBundle(fake);
  });

  after(async () => {
    await loaded.extension.deactivate();
    loaded.restore();
  });

  it("activates the Python extension, uses its environment, and restarts when it changes", async () => {
    await loaded.extension.activate(context());
    assert.ok(python.isActive);
    await until("the first environment's probe", () => fake.output.some((l) => l.includes(exe)), fake);
    await until("its failure", () => fake.messages.some((m) => /first\/bin\/python/.test(m.text)), fake);
    assert.match(
      fake.output.join("\n"),
      /the Python extension's active environment: \/envs\/first\/bin\/python/,
    );
    exe = "/envs/second/bin/python";
    envChanged.fire({ id: exe, path: exe });
    await until(
      "a restart with the new environment",
      () => fake.messages.some((m) => /second\/bin\/python/.test(m.text)),
      fake,
    );
    assert.match(
      fake.output.join("\n"),
      /Restarting the server: the interpreter is now \/envs\/second\/bin\/python/,
    );
  });
});
