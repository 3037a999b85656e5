/**
 * End to end over the protocol: the real Python server, started as the extension starts it,
 * driven through initialize -> didOpen -> diagnostics -> codeAction -> executeCommand.
 */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import {
  actionCommand,
  advertisedCommands,
  executeServerCommand,
  findServerCommand,
  type LspCodeAction,
  type LspCommand,
  SERVER_COMMANDS,
} from "../../src/serverCommands";
import { parseStatus } from "../../src/status";
import { FIXTURES, fileUri, ServerSession } from "./session";

const EXECUTING: string[] = Object.values(SERVER_COMMANDS);

describe("protocol end to end (trusted workspace)", { timeout: 90_000 }, () => {
  let session: ServerSession;

  before(async () => {
    session = await ServerSession.start({ trusted: true });
  });

  after(async () => {
    if (session) {
      assert.equal(await session.close(), 0, "the server did not exit cleanly after shutdown/exit");
    }
  });

  it("initializes as stitch-lsp with the features the extension relies on", () => {
    assert.equal(session.serverInfo?.name, "stitch-lsp");
    const caps = session.capabilities as Record<string, unknown>;
    assert.ok(caps.textDocumentSync, "no text document sync");
    assert.ok(caps.hoverProvider, "no hover");
    assert.ok(caps.documentSymbolProvider, "no document symbols");
    for (const cmd of advertisedCommands(session.capabilities)) {
      assert.match(cmd, /^stitch\./);
    }
  });

  it("sends a stitch/status the status bar understands once initialized", async () => {
    const first = await session.until("a stitch/status notification", () => session.statuses[0]);
    const parsed = parseStatus(first);
    assert.ok(parsed, `malformed stitch/status: ${JSON.stringify(first)}`);
    assert.equal(parsed.state, "idle");
  });

  it("reads the stitch settings with workspace/configuration and registers for changes", async () => {
    await session.until("a client/registerCapability request", () => session.registrations[0]);
    const methods = JSON.stringify(session.registrations);
    assert.match(methods, /workspace\/didChangeConfiguration/);
    assert.ok(session.configurationRequests > 0, "the server never asked for the stitch settings");
    // Every default the extension declares is one the server accepts.
    const rejected = session.logs.filter((l) => /invalid setting/.test(l));
    assert.deepEqual(rejected, []);
  });

  it("publishes the static checks for a ModelNew that falls back to PyTorch", async () => {
    const uri = await session.open(path.join(FIXTURES, "model_new_fallback.py"), "python");
    const diagnostics = await session.diagnosticsFor(uri);
    const fallback = diagnostics.find((d) => d.code === "stitch.torch-fallback");
    assert.ok(fallback, `no stitch.torch-fallback in ${JSON.stringify(diagnostics)}`);
    assert.equal(fallback.severity, 1);
    assert.equal(fallback.range.start.line, 37); // `except Exception:` on line 38
    assert.ok(diagnostics.every((d) => String(d.code).startsWith("stitch.")));
  });

  it("publishes CUDA checks for a .cu file opened as cuda-cpp", async () => {
    const uri = await session.open(path.join(FIXTURES, "scale.cu"), "cuda-cpp");
    const diagnostics = await session.diagnosticsFor(uri);
    const block = diagnostics.find((d) => d.code === "stitch.block-size");
    assert.ok(block, `no stitch.block-size in ${JSON.stringify(diagnostics)}`);
    assert.equal(block.range.start.line, 7);
  });

  it("outlines and hovers a KernelBench problem", async () => {
    const uri = await session.open(path.join(FIXTURES, "model.py"), "python");
    await session.diagnosticsFor(uri);
    const symbols = (await session.request("textDocument/documentSymbol", { textDocument: { uri } })) as {
      name: string;
    }[];
    assert.ok(
      symbols.some((s) => s.name === "Model"),
      `no Model symbol in ${JSON.stringify(symbols)}`,
    );
    const hover = (await session.request("textDocument/hover", {
      textDocument: { uri },
      position: { line: 6, character: 7 }, // `class Model`
    })) as { contents: { kind: string; value: string } } | null;
    assert.ok(hover, "no hover on the Model class");
    assert.equal(hover.contents.kind, "markdown");
    assert.match(hover.contents.value, /Model/);
  });

  it("offers Optimize at the fallback diagnostic in ModelNew, with an advertised command", async () => {
    const docUri = fileUri(path.join(FIXTURES, "model_new_fallback.py"));
    const diagnostics = await session.diagnosticsFor(docUri);
    const fallback = diagnostics.find((d) => d.code === "stitch.torch-fallback")!;
    const actions = (await session.request("textDocument/codeAction", {
      textDocument: { uri: docUri },
      range: { start: fallback.range.start, end: fallback.range.start },
      context: { diagnostics: [fallback] },
    })) as (LspCodeAction | LspCommand)[];
    const offered = advertisedCommands(session.capabilities);
    for (const action of actions) {
      const cmd = actionCommand(action);
      if (cmd) {
        assert.ok(offered.includes(cmd.command), `${cmd.command} is used but not advertised`);
      }
    }
    const optimize = actions.map(actionCommand).find((c) => c?.command === SERVER_COMMANDS.optimize);
    assert.ok(optimize, `no ${SERVER_COMMANDS.optimize} action in ${JSON.stringify(actions)}`);
    assert.equal(optimize.title, "Optimize with profiler feedback");
  });

  it("runs Generate from the Model's code action through executeCommand, as the palette does", async () => {
    // A saved copy of the problem, then an unsaved edit: the server must refuse to work from a
    // file whose text on disk is not what the editor shows, quickly and without writing anything.
    const folder = fs.mkdtempSync(path.join(os.tmpdir(), "stitch-e2e-"));
    const file = path.join(folder, "model.py");
    fs.copyFileSync(path.join(FIXTURES, "model.py"), file);
    const uri = await session.open(file, "python");
    await session.diagnosticsFor(uri);
    const text = fs.readFileSync(file, "utf8");
    const classLine = text.split("\n").findIndex((l) => l.startsWith("class Model"));
    const target = {
      uri,
      range: { start: { line: classLine + 1, character: 4 }, end: { line: classLine + 1, character: 4 } },
      fullRange: { start: { line: 0, character: 0 }, end: { line: text.split("\n").length, character: 0 } },
    };
    const cmd = await findServerCommand(session.conn, session.capabilities, target, SERVER_COMMANDS.generate);
    assert.ok(cmd, "the server offers no Generate action inside the Model class");
    assert.equal(cmd.title, "Generate fused CUDA implementation");
    assert.deepEqual(cmd.arguments, [uri]);

    await session.conn.sendNotification("textDocument/didChange", {
      textDocument: { uri, version: 2 },
      contentChanges: [{ text: `# an unsaved edit\n${text}` }],
    });
    const result = (await executeServerCommand(session.conn, cmd)) as { ok: boolean; message: string };
    assert.equal(result.ok, false);
    assert.match(result.message, /save/i);
    assert.deepEqual(fs.readdirSync(folder), ["model.py"], "the server wrote a file");
    fs.rmSync(folder, { recursive: true, force: true });
  });
});

describe("protocol end to end (untrusted workspace)", { timeout: 60_000 }, () => {
  it("runs nothing the workspace ships, even files named like the modules the server imports", async () => {
    const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "stitch-hostile-"));
    const marker = path.join(workspace, "EXECUTED");
    const payload = `open(${JSON.stringify(marker)}, "w").write("ran")\n`;
    fs.mkdirSync(path.join(workspace, "stitch_lsp"));
    fs.writeFileSync(path.join(workspace, "stitch_lsp", "__init__.py"), payload);
    for (const name of ["json.py", "typing.py", "asyncio.py", "profile.py"]) {
      fs.writeFileSync(path.join(workspace, name), payload);
    }
    fs.copyFileSync(path.join(FIXTURES, "model_new_fallback.py"), path.join(workspace, "model_new.py"));
    const session = await ServerSession.start({ trusted: false, workspace });
    try {
      const uri = await session.open(path.join(workspace, "model_new.py"), "python");
      const diagnostics = await session.diagnosticsFor(uri);
      assert.ok(diagnostics.some((d) => d.code === "stitch.torch-fallback"));
      assert.ok(!fs.existsSync(marker), "a workspace file was executed");
    } finally {
      assert.equal(await session.close(), 0);
      fs.rmSync(workspace, { recursive: true, force: true });
    }
  });

  it("advertises no command that executes code, and still analyses", async () => {
    const session = await ServerSession.start({ trusted: false });
    try {
      const offered = advertisedCommands(session.capabilities);
      for (const cmd of EXECUTING) {
        assert.ok(!offered.includes(cmd), `${cmd} is advertised in an untrusted workspace`);
      }
      const uri = await session.open(path.join(FIXTURES, "model_new_fallback.py"), "python");
      const diagnostics = await session.diagnosticsFor(uri);
      const fallback = diagnostics.find((d) => d.code === "stitch.torch-fallback");
      assert.ok(fallback);
      const actions = (await session.request("textDocument/codeAction", {
        textDocument: { uri },
        range: { start: fallback.range.start, end: fallback.range.start },
        context: { diagnostics: [fallback] },
      })) as (LspCodeAction | LspCommand)[] | null;
      for (const action of actions ?? []) {
        const cmd = actionCommand(action);
        assert.ok(!cmd || !EXECUTING.includes(cmd.command), `${cmd?.command} offered while untrusted`);
      }
    } finally {
      assert.equal(await session.close(), 0);
    }
  });
});
