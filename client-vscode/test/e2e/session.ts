/**
 * A protocol-level client for the real server, started exactly as the extension starts it:
 * resolveInterpreter -> probe -> `python -m stitch_lsp serve` with the same initializationOptions.
 */

import { type ChildProcess, spawn } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import {
  createMessageConnection,
  type MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
} from "vscode-languageserver-protocol/node";
import { type Interpreter, resolveInterpreter } from "../../src/interpreter";
import { nodeRunner } from "../../src/processRunner";
import { type ServerCapabilitiesLike } from "../../src/serverCommands";
import { initializationOptions, parseProbe, probeLaunch, serverLaunch } from "../../src/serverLaunch";
import { serverSettings } from "../../src/settings";
import { EXTENSION_ROOT, loadManifest } from "../support/fakes";

/** The stitch-lsp checkout (its test fixtures): $STITCH_REPO_ROOT when the client was copied away. */
export const REPO_ROOT = path.resolve(process.env.STITCH_REPO_ROOT ?? path.join(EXTENSION_ROOT, ".."));
export const FIXTURES = path.join(EXTENSION_ROOT, "test", "fixtures");

/** STITCH_PYTHON, else the repository's .venv, else python3: the Python that has the server. */
export function testPython(): string {
  const fromEnv = process.env.STITCH_PYTHON;
  if (fromEnv) {
    return fromEnv;
  }
  const venv =
    process.platform === "win32"
      ? path.join(REPO_ROOT, ".venv", "Scripts", "python.exe")
      : path.join(REPO_ROOT, ".venv", "bin", "python");
  return fs.existsSync(venv) ? venv : "python3";
}

export function fileUri(file: string): string {
  return `file://${path.resolve(file)}`;
}

/** What VS Code (through vscode-languageclient 9) declares, for the parts this server reads. */
export const VSCODE_CAPABILITIES = {
  general: { positionEncodings: ["utf-16"] },
  window: {
    workDoneProgress: true,
    showMessage: { messageActionItem: { additionalPropertiesSupport: true } },
  },
  workspace: {
    applyEdit: true,
    configuration: true,
    workspaceFolders: true,
    didChangeConfiguration: { dynamicRegistration: true },
    didChangeWatchedFiles: { dynamicRegistration: true, relativePatternSupport: true },
    executeCommand: { dynamicRegistration: true },
    workspaceEdit: {
      documentChanges: true,
      resourceOperations: ["create", "rename", "delete"],
      failureHandling: "textOnlyTransactional",
    },
    codeLens: { refreshSupport: true },
    diagnostics: { refreshSupport: true },
  },
  textDocument: {
    synchronization: { dynamicRegistration: true, didSave: true, willSave: true },
    publishDiagnostics: {
      relatedInformation: true,
      versionSupport: false,
      codeDescriptionSupport: true,
      dataSupport: true,
    },
    hover: { dynamicRegistration: true, contentFormat: ["markdown", "plaintext"] },
    documentSymbol: { dynamicRegistration: true, hierarchicalDocumentSymbolSupport: true },
    codeAction: {
      dynamicRegistration: true,
      isPreferredSupport: true,
      disabledSupport: true,
      dataSupport: true,
      resolveSupport: { properties: ["edit"] },
      codeActionLiteralSupport: {
        codeActionKind: {
          valueSet: [
            "",
            "quickfix",
            "refactor",
            "refactor.extract",
            "refactor.inline",
            "refactor.rewrite",
            "source",
            "source.organizeImports",
          ],
        },
      },
      honorsChangeAnnotations: false,
    },
    codeLens: { dynamicRegistration: true },
  },
};

export interface Published {
  uri: string;
  diagnostics: {
    range: { start: { line: number; character: number } };
    severity?: number;
    code?: string | number;
    message: string;
    source?: string;
  }[];
}

export class ServerSession {
  readonly diagnostics = new Map<string, Published>();
  readonly statuses: unknown[] = [];
  readonly logs: string[] = [];
  readonly applyEdits: unknown[] = [];
  readonly registrations: unknown[] = [];
  configurationRequests = 0;
  capabilities: ServerCapabilitiesLike & Record<string, unknown> = {};
  serverInfo: { name: string; version?: string } | undefined;
  exitCode: Promise<number | null>;
  private waiters: (() => void)[] = [];

  private constructor(
    readonly child: ChildProcess,
    readonly conn: MessageConnection,
    readonly interpreter: Interpreter,
    readonly settings: Record<string, unknown>,
  ) {
    this.exitCode = new Promise((resolve) => child.on("exit", (code) => resolve(code)));
    child.stderr?.on("data", (chunk: Buffer) => this.logs.push(`[stderr] ${chunk.toString()}`));
    conn.onNotification("textDocument/publishDiagnostics", (params: Published) => {
      this.diagnostics.set(params.uri, params);
      this.wake();
    });
    conn.onNotification("stitch/status", (params: unknown) => {
      this.statuses.push(params);
      this.wake();
    });
    conn.onNotification("window/logMessage", (params: { message: string }) => this.logs.push(params.message));
    conn.onNotification("window/showMessage", (params: { message: string }) =>
      this.logs.push(params.message),
    );
    conn.onNotification("$/progress", () => this.wake());
    conn.onRequest("workspace/configuration", (params: { items: { section?: string }[] }) => {
      this.configurationRequests += 1;
      return params.items.map((item) => (item.section === "stitch" ? this.settings : null));
    });
    conn.onRequest("client/registerCapability", (params: unknown) => {
      this.registrations.push(params);
      return null;
    });
    conn.onRequest("window/workDoneProgress/create", () => null);
    conn.onRequest("workspace/codeLens/refresh", () => null);
    conn.onRequest("workspace/applyEdit", (params: unknown) => {
      this.applyEdits.push(params);
      this.wake();
      return { applied: false, failureReason: "the protocol test applies no edits" };
    });
    conn.listen();
  }

  /** Resolves the interpreter and probes it as the extension does, then starts the server. */
  static async start(opts: { trusted: boolean; workspace?: string }): Promise<ServerSession> {
    const workspace = opts.workspace ?? FIXTURES;
    const manifest = loadManifest();
    const interpreter = await resolveInterpreter({
      configured: [testPython()],
      trusted: opts.trusted,
      workspaceFolders: [workspace],
      platform: process.platform,
      env: process.env,
      home: process.env.HOME ?? "",
    });
    // Like the extension: run from a private empty folder, never from the workspace.
    const launchOpts = {
      cwd: fs.mkdtempSync(path.join(os.tmpdir(), "stitch-server-cwd-")),
      env: { ...process.env },
    };
    const probe = parseProbe(
      await nodeRunner.run(probeLaunch(interpreter, launchOpts), 60_000),
      interpreter.command.join(" "),
    );
    if (!probe.ok) {
      throw new Error(`${probe.message} Set STITCH_PYTHON to a Python with stitch-lsp installed.`);
    }
    const settings = serverSettings(manifest, () => undefined);
    const launch = serverLaunch(interpreter, launchOpts);
    const child = spawn(launch.command, launch.args, {
      cwd: launch.cwd,
      env: launch.env as NodeJS.ProcessEnv,
      stdio: ["pipe", "pipe", "pipe"],
    });
    const conn = createMessageConnection(
      new StreamMessageReader(child.stdout!),
      new StreamMessageWriter(child.stdin!),
    );
    const session = new ServerSession(child, conn, interpreter, settings);
    const result = (await session.request("initialize", {
      processId: process.pid,
      clientInfo: { name: "stitch-lsp protocol test", version: "0.1.0" },
      rootUri: fileUri(workspace),
      workspaceFolders: [{ uri: fileUri(workspace), name: path.basename(workspace) }],
      capabilities: VSCODE_CAPABILITIES,
      initializationOptions: initializationOptions(settings, opts.trusted),
      trace: "off",
    })) as {
      capabilities: ServerCapabilitiesLike & Record<string, unknown>;
      serverInfo?: { name: string; version?: string };
    };
    session.capabilities = result.capabilities;
    session.serverInfo = result.serverInfo;
    await session.conn.sendNotification("initialized", {});
    return session;
  }

  request(method: string, params: unknown): Promise<unknown> {
    return this.conn.sendRequest(method, params);
  }

  async open(file: string, languageId: string): Promise<string> {
    const uri = fileUri(file);
    await this.conn.sendNotification("textDocument/didOpen", {
      textDocument: { uri, languageId, version: 1, text: fs.readFileSync(file, "utf8") },
    });
    return uri;
  }

  /** Waits until `ready()` holds, re-checking on every message from the server. */
  async until<T>(what: string, ready: () => T | undefined, timeoutMs = 20_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = ready();
      if (value !== undefined) {
        return value;
      }
      const left = deadline - Date.now();
      if (left <= 0) {
        throw new Error(`timed out waiting for ${what}; server log:\n${this.logs.join("\n")}`);
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 500));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  async diagnosticsFor(uri: string): Promise<Published["diagnostics"]> {
    return (await this.until(`diagnostics for ${uri}`, () => this.diagnostics.get(uri))).diagnostics;
  }

  /** shutdown, exit, and the process's exit status (killed after 10 s if it hangs). */
  async close(): Promise<number | null> {
    const timer = setTimeout(() => this.child.kill(), 10_000);
    try {
      await this.request("shutdown", null);
      await this.conn.sendNotification("exit");
    } catch (err) {
      this.logs.push(`shutdown failed: ${String(err)}`);
      this.child.kill();
    }
    const code = await this.exitCode;
    clearTimeout(timer);
    this.conn.dispose();
    return code;
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) {
      w();
    }
  }
}
