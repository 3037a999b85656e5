/**
 * The bundled extension, with its real vscode-languageclient, starts the real server (found as
 * the extension finds it), receives its stitch/status notifications into the status bar,
 * registers the server's commands next to its own, restarts on a setting change and stops on
 * deactivate. Only the `vscode` module is fake.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import { CLIENT_COMMANDS } from "../../src/controller";
import { context, loadBundle, until } from "../support/bundle";
import { fakeDocument, makeFakeVscode } from "../support/fakeVscode";
import { FIXTURES, REPO_ROOT, testPython } from "./session";

// A real Nsight Compute report kept with the Python tests' fixtures.
const NCU_REPORT = path.resolve(REPO_ROOT, "tests", "fixtures", "ncu", "relu_bias_full.ncu-rep");

describe("the bundled extension with the real server", { timeout: 90_000 }, () => {
  // model.py, open in the editor with an unsaved edit, the cursor inside `class Model`.
  const modelFile = path.join(FIXTURES, "model.py");
  const unsaved = `# an unsaved edit\n${fs.readFileSync(modelFile, "utf8")}`;
  const classLine = unsaved.split("\n").findIndex((l) => l.startsWith("class Model"));
  const fake = makeFakeVscode({
    settings: { "python.interpreter": [testPython()], "trace.server": "off" },
    workspaceFolder: FIXTURES,
    documents: [fakeDocument(modelFile, "python", unsaved)],
    cursor: { line: classLine + 2, character: 8 },
    openDialog: () => NCU_REPORT,
  });
  const ctx = context();
  let loaded: ReturnType<typeof loadBundle>;
  const startsLogged = () =>
    fake.output.filter((l) => l.includes("stitch-lsp ") && l.includes(" in ")).length;

  before(() => {
    loaded = loadBundle(fake);
  });

  after(() => {
    loaded.restore();
  });

  it("starts the server and shows its status in the status bar", async () => {
    await loaded.extension.activate(ctx);
    // The server's first stitch/status ("stitch-lsp ready ...") lands in the item's tooltip.
    await until(
      "the server's first stitch/status",
      () => /stitch-lsp ready/.test(String(fake.statusItem.tooltip)),
      fake,
    );
    assert.equal(fake.statusItem.text, "$(circuit-board) Stitch");
    assert.deepEqual(
      fake.messages.filter((m) => m.level === "error"),
      [],
      "the extension showed an error",
    );
  });

  it("registers the server's advertised commands beside its own, without clashes", async () => {
    const line = fake.output.find((l) => l.includes("Server commands:"));
    assert.ok(line, fake.output.join("\n"));
    const advertised = line
      .replace(/.*Server commands: /, "")
      .replace(/\.$/, "")
      .split(", ")
      .filter((c) => c !== "none");
    for (const id of [...CLIENT_COMMANDS, ...advertised]) {
      assert.ok(fake.registered.has(id), `${id} is not registered`);
    }
  });

  it("runs Generate from the palette through the server's code action, over the real client", async () => {
    const before = fake.messages.length;
    await fake.registered.get("stitch.generateFusedImplementation")!();
    // The server refuses to work from a file whose disk text differs from the editor's, and says
    // so through window/showMessage, which the client shows as a VS Code warning.
    await until("the server's message", () => fake.messages.length > before, fake);
    const shown = fake.messages.slice(before);
    assert.ok(
      shown.some((m) => m.level === "warn" && /save the file first/.test(m.text)),
      JSON.stringify(shown),
    );
    assert.match(fake.output.join("\n"), /Running "Generate fused CUDA implementation" \(stitch\.generate\)/);
  });

  it(
    "shows a real Nsight Compute report through the server's stitch.showProfile",
    { skip: fs.existsSync(NCU_REPORT) ? false : `no ncu fixture at ${NCU_REPORT}` },
    async () => {
      assert.ok(fake.registered.has("stitch.showProfile"), "the server does not offer stitch.showProfile");
      await fake.registered.get("stitch.showNcuReport")!();
      const line = fake.output.find((l) => l.startsWith("[client] stitch.showProfile returned"));
      assert.ok(line, fake.output.join("\n"));
      const result = JSON.parse(line.replace("[client] stitch.showProfile returned ", ""));
      assert.equal(result.ok, true, line);
      assert.equal(result.report, NCU_REPORT);
      assert.equal(result.kernels?.[0]?.name, "relu_bias", line);
    },
  );

  it("restarts the server when a server setting changes, and not for the trace level", async () => {
    const before = startsLogged();
    fake.configuration.fire({ affectsConfiguration: (s: string) => s === "stitch.trace.server" });
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(startsLogged(), before);
    fake.settings.llmModel = "another-model";
    fake.configuration.fire({
      affectsConfiguration: (s: string) => s === "stitch.llmModel" || s === "stitch",
    });
    await until("a second server start", () => startsLogged() === before + 1, fake);
    await until("the new server's status", () => fake.statusItem.text.startsWith("$(circuit-board)"), fake);
  });

  it("stops the server on deactivate", async () => {
    if (process.env.STITCH_TEST_VERBOSE) console.log(fake.output.join("\n"));
    await loaded.extension.deactivate();
    assert.equal(fake.statusItem.text, "$(circle-slash) Stitch");
  });
});
