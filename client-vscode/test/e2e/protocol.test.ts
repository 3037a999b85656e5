/**
 * End to end over the protocol: the real Python server, started as the extension starts it,
 * driven through initialize -> didOpen -> diagnostics -> codeAction -> executeCommand.
 */

import assert from "node:assert/strict";
import * as path from "node:path";
import { after, before, describe, it } from "node:test";
import {
  actionCommand,
  advertisedCommands,
  type LspCodeAction,
  type LspCommand,
  SERVER_COMMANDS,
} from "../../src/serverCommands";
import { parseStatus } from "../../src/status";
import { FIXTURES, ServerSession } from "./session";

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
    assert.ok(symbols.some((s) => s.name === "Model"), `no Model symbol in ${JSON.stringify(symbols)}`);
  });

  it("answers code actions at a diagnostic, and each action's command is advertised", async () => {
    const uri = path.join(FIXTURES, "model_new_fallback.py");
    const docUri = `file://${uri}`;
    const diagnostics = await session.diagnosticsFor(docUri);
    const fallback = diagnostics.find((d) => d.code === "stitch.torch-fallback")!;
    if (!session.capabilities.codeActionProvider) {
      // The server offers no code actions yet: the request must not be advertised or answered.
      await assert.rejects(
        session.request("textDocument/codeAction", {
          textDocument: { uri: docUri },
          range: { start: fallback.range.start, end: fallback.range.start },
          context: { diagnostics: [fallback] },
        }),
      );
      return;
    }
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
  });
});

describe("protocol end to end (untrusted workspace)", { timeout: 60_000 }, () => {
  it("advertises no command that executes code, and still analyses", async () => {
    const session = await ServerSession.start({ trusted: false });
    try {
      const offered = advertisedCommands(session.capabilities);
      for (const cmd of EXECUTING) {
        assert.ok(!offered.includes(cmd), `${cmd} is advertised in an untrusted workspace`);
      }
      const uri = await session.open(path.join(FIXTURES, "model_new_fallback.py"), "python");
      const diagnostics = await session.diagnosticsFor(uri);
      assert.ok(diagnostics.some((d) => d.code === "stitch.torch-fallback"));
    } finally {
      assert.equal(await session.close(), 0);
    }
  });
});
