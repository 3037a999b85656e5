import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  actionCommand,
  advertisedCommands,
  type CommandTarget,
  executeServerCommand,
  findServerCommand,
  type RequestSender,
} from "../../src/serverCommands";

const target: CommandTarget = {
  uri: "file:///w/model.py",
  range: { start: { line: 10, character: 4 }, end: { line: 10, character: 4 } },
  fullRange: { start: { line: 0, character: 0 }, end: { line: 40, character: 0 } },
};

class Conn implements RequestSender {
  readonly sent: { method: string; params: unknown }[] = [];
  constructor(private readonly answers: Record<string, (params: unknown) => unknown>) {}
  sendRequest(method: string, params: unknown): Promise<unknown> {
    this.sent.push({ method, params });
    return Promise.resolve(this.answers[method]?.(params) ?? null);
  }
}

const generate = {
  title: "Generate fused CUDA implementation",
  command: "stitch.generate",
  arguments: [{ uri: target.uri, cls: "Model" }],
};

describe("server commands from the palette", () => {
  it("reads the advertised commands", () => {
    assert.deepEqual(advertisedCommands({ executeCommandProvider: { commands: ["stitch.generate"] } }), [
      "stitch.generate",
    ]);
    assert.deepEqual(advertisedCommands(undefined), []);
  });

  it("understands both Command and CodeAction literals", () => {
    assert.equal(actionCommand(generate), generate);
    assert.equal(actionCommand({ title: "t", command: generate }), generate);
    assert.equal(actionCommand({ title: "edit only", edit: {} }), undefined);
  });

  it("takes the command and arguments from the code action at the cursor", async () => {
    const conn = new Conn({
      "textDocument/codeAction": () => [
        { title: "Quick fix", kind: "quickfix", edit: {} },
        { title: generate.title, command: generate },
      ],
    });
    const found = await findServerCommand(conn, { codeActionProvider: true }, target, "stitch.generate");
    assert.deepEqual(found, generate);
    const params = conn.sent[0].params as { range: unknown; textDocument: { uri: string } };
    assert.deepEqual(params.range, target.range);
    assert.equal(params.textDocument.uri, target.uri);
    await executeServerCommand(conn, found!);
    assert.deepEqual(conn.sent.at(-1), {
      method: "workspace/executeCommand",
      params: { command: "stitch.generate", arguments: generate.arguments },
    });
  });

  it("resolves lazy code actions when the server resolves them, and skips disabled ones", async () => {
    const conn = new Conn({
      "textDocument/codeAction": () => [
        { title: "disabled", command: generate, disabled: { reason: "no" } },
        { title: generate.title, data: { id: 7 } },
      ],
      "codeAction/resolve": (action) => ({ ...(action as object), command: generate }),
    });
    const found = await findServerCommand(
      conn,
      { codeActionProvider: { resolveProvider: true } },
      target,
      "stitch.generate",
    );
    assert.deepEqual(found, generate);
    assert.ok(conn.sent.some((s) => s.method === "codeAction/resolve"));
  });

  it("falls back to the nearest code lens above the cursor, then to the whole file", async () => {
    const verify = (line: number) => ({
      title: `Verify ${line}`,
      command: "stitch.verify",
      arguments: [line],
    });
    const conn = new Conn({
      "textDocument/codeAction": () => [],
      "textDocument/codeLens": () => [
        {
          range: { start: { line: 30, character: 0 }, end: { line: 30, character: 0 } },
          command: verify(30),
        },
        { range: { start: { line: 2, character: 0 }, end: { line: 2, character: 0 } }, command: verify(2) },
        { range: { start: { line: 8, character: 0 }, end: { line: 8, character: 0 } }, command: verify(8) },
      ],
    });
    const caps = { codeActionProvider: true, codeLensProvider: {} };
    assert.deepEqual((await findServerCommand(conn, caps, target, "stitch.verify"))?.arguments, [8]);

    const wholeFile = new Conn({
      "textDocument/codeAction": (params) =>
        (params as { range: { start: { line: number } } }).range.start.line === 0 ? [generate] : [],
    });
    assert.deepEqual(
      await findServerCommand(wholeFile, { codeActionProvider: true }, target, "stitch.generate"),
      generate,
    );
  });

  it("returns nothing when the server offers no such action, and asks nothing it cannot answer", async () => {
    const conn = new Conn({
      "textDocument/codeAction": () => [{ title: "other", command: { title: "x", command: "stitch.other" } }],
    });
    assert.equal(
      await findServerCommand(conn, { codeActionProvider: true }, target, "stitch.optimize"),
      undefined,
    );
    assert.ok(!conn.sent.some((s) => s.method === "textDocument/codeLens"));
  });
});
