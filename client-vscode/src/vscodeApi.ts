/**
 * The only module (with extension.ts) that touches `vscode` and vscode-languageclient. It adapts
 * them to the small interfaces in controller.ts, so that everything with logic in it runs under
 * node's test runner with fakes.
 */

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { PythonExtension } from "@vscode/python-extension";
import * as vscode from "vscode";
import {
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
  State,
  WorkDoneProgress,
  WorkDoneProgressCancelNotification,
  WorkDoneProgressCreateRequest,
} from "vscode-languageclient/node";
import type { ClientHandle, ClientSpec, Host, Ui } from "./controller";
import { JOBS_METHOD } from "./jobs";
import { NotificationProgress, type ProgressUi, type ProgressValue } from "./progress";
import { PYTHON_EXTENSION_ID, type PythonExtensionApi } from "./pythonExtension";
import type { CommandTarget, ServerCapabilitiesLike } from "./serverCommands";
import { SECTION, USER_SETTINGS_KEY, userSettings } from "./settings";
import { STATUS_NOTIFICATION, type StatusView } from "./status";

export const CLIENT_ID = SECTION; // vscode-languageclient reads `stitch.trace.server` from this id.
export const CLIENT_NAME = "Stitch CUDA";

export const DOCUMENT_SELECTOR = [
  { scheme: "file", language: "python" },
  { scheme: "untitled", language: "python" },
  { scheme: "file", language: "cuda-cpp" },
  { scheme: "untitled", language: "cuda-cpp" },
];

export class VscodeHost implements Host {
  readonly env = process.env;
  readonly platform = process.platform;
  readonly home = os.homedir();
  readonly ui: Ui;

  constructor(
    private readonly context: vscode.ExtensionContext,
    readonly output: vscode.LogOutputChannel,
    private readonly statusItem: vscode.StatusBarItem,
  ) {
    this.ui = {
      info: (msg, ...actions) => Promise.resolve(vscode.window.showInformationMessage(msg, ...actions)),
      warn: (msg, ...actions) => Promise.resolve(vscode.window.showWarningMessage(msg, ...actions)),
      error: (msg, ...actions) => Promise.resolve(vscode.window.showErrorMessage(msg, ...actions)),
      pickInstallPath: async () => {
        const picked = await vscode.window.showOpenDialog({
          canSelectFiles: true,
          canSelectFolders: true,
          canSelectMany: false,
          openLabel: "Install stitch-lsp from here",
          filters: { "Python wheel or project folder": ["whl"] },
        });
        return picked?.[0]?.fsPath;
      },
      pickReport: async () => {
        const picked = await vscode.window.showOpenDialog({
          canSelectFiles: true,
          canSelectFolders: false,
          canSelectMany: false,
          openLabel: "Show this report",
          filters: { "Nsight Compute report": ["ncu-rep"] },
        });
        return picked?.[0]?.fsPath;
      },
      openSettings: (query) => {
        void vscode.commands.executeCommand("workbench.action.openSettings", query);
      },
      showOutput: () => this.output.show(true),
    };
  }

  setting(key: string): unknown {
    return vscode.workspace.getConfiguration(SECTION, this.workspaceResource()).get(key);
  }

  /** The active file's workspace folder, else the first folder. */
  workspaceResource(): vscode.Uri | undefined {
    const active = vscode.window.activeTextEditor?.document.uri;
    const folder = active !== undefined ? vscode.workspace.getWorkspaceFolder(active) : undefined;
    return (folder ?? vscode.workspace.workspaceFolders?.[0])?.uri;
  }

  userSetting(key: string): unknown {
    return userLevelValue(key);
  }

  isTrusted(): boolean {
    return vscode.workspace.isTrusted;
  }

  workspaceFolders(): string[] {
    return (vscode.workspace.workspaceFolders ?? []).map((folder) => folder.uri.fsPath);
  }

  async pythonExtension(): Promise<PythonExtensionApi | undefined> {
    if (vscode.extensions.getExtension(PYTHON_EXTENSION_ID) === undefined) {
      return undefined; // not installed: PythonExtension.api() would throw
    }
    return PythonExtension.api();
  }

  serverDirectory(): string {
    const folder = path.join(this.context.globalStorageUri.fsPath, "server-cwd");
    fs.mkdirSync(folder, { recursive: true });
    return folder;
  }

  bundledFiles(): string[] {
    const folder = path.join(this.context.extensionPath, "out", "bundled");
    try {
      return fs.readdirSync(folder).map((name) => path.join(folder, name));
    } catch {
      return [];
    }
  }

  log(line: string): void {
    this.output.info(`[client] ${line}`);
  }

  setContext(key: string, value: boolean): void {
    void vscode.commands.executeCommand("setContext", key, value);
  }

  showStatus(view: StatusView): void {
    this.statusItem.text = view.text;
    this.statusItem.tooltip = view.tooltip;
    this.statusItem.command = view.command;
    this.statusItem.backgroundColor =
      view.kind === "error"
        ? new vscode.ThemeColor("statusBarItem.errorBackground")
        : view.kind === "warning"
          ? new vscode.ThemeColor("statusBarItem.warningBackground")
          : undefined;
    this.statusItem.show();
  }
}

/** The user-level (global) value of `stitch.<key>`, never a workspace's. */
function userLevelValue(key: string): unknown {
  return vscode.workspace.getConfiguration(SECTION).inspect(key)?.globalValue;
}

/**
 * Server-created progress as cancellable notifications. vscode-languageclient answers
 * `window/workDoneProgress/create` itself and shows the progress in the status bar, without a
 * cancel button; once the client runs, this handler takes over that request (a later handler for
 * a method replaces the earlier one).
 */
function showProgressAsNotifications(client: LanguageClient, ui: ProgressUi): void {
  client.onRequest(WorkDoneProgressCreateRequest.type, ({ token }) => {
    const part = new NotificationProgress(ui, () => {
      void client.sendNotification(WorkDoneProgressCancelNotification.type, { token });
    });
    const sub = client.onProgress(WorkDoneProgress.type, token, (value) => {
      part.handle(value as ProgressValue);
      if (part.done) {
        sub.dispose();
      }
    });
  });
}

/** Builds a vscode-languageclient LanguageClient for one server process. */
export function languageClientFactory(
  output: vscode.LogOutputChannel,
  progressUi: ProgressUi,
): (spec: ClientSpec) => ClientHandle {
  return (spec: ClientSpec): ClientHandle => {
    const serverOptions: ServerOptions = {
      command: spec.launch.command,
      args: spec.launch.args,
      // No `transport`: with TransportKind.stdio the client appends `--stdio`, which `serve`
      // does not take. Without it the client still talks over the process's stdin/stdout.
      options: { cwd: spec.launch.cwd, env: spec.launch.env },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: DOCUMENT_SELECTOR,
      // No `synchronize.configurationSection`: the server pulls the `stitch` section with
      // workspace/configuration and registers for its changes itself.
      initializationOptions: spec.init,
      outputChannel: output,
      revealOutputChannelOn: RevealOutputChannelOn.Never,
      middleware: {
        workspace: {
          // The `stitch` section the server pulls carries `userSettings`, always computed here
          // from user-level values: a workspace cannot supply it as an undeclared setting.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            if (!Array.isArray(result)) {
              return result;
            }
            return result.map((value, i) =>
              params.items[i]?.section === SECTION && value !== null && typeof value === "object"
                ? { ...(value as object), [USER_SETTINGS_KEY]: userSettings(userLevelValue) }
                : value,
            );
          },
        },
        // Second line of defence: the server advertises no execution commands when untrusted.
        executeCommand: (command, args, next) => {
          if (!spec.trusted) {
            void vscode.window.showWarningMessage(
              `Stitch: ${command} needs a trusted workspace; here stitch-lsp only analyses files.`,
            );
            return undefined;
          }
          return next(command, args);
        },
      },
    };
    const client = new LanguageClient(CLIENT_ID, CLIENT_NAME, serverOptions, clientOptions);
    return {
      start: async () => {
        await client.start();
        showProgressAsNotifications(client, progressUi);
      },
      // A client is never started twice: dispose also drops its listeners and stops auto-restarts.
      stop: () => client.dispose(),
      capabilities: () => client.initializeResult?.capabilities as ServerCapabilitiesLike | undefined,
      sendRequest: (method, params) => client.sendRequest(method, params) as Promise<unknown>,
      onStatus: (listener) => {
        client.onNotification(STATUS_NOTIFICATION, listener);
      },
      onJobs: (listener) => {
        client.onNotification(JOBS_METHOD, listener);
      },
      onRunningChange: (listener) => {
        client.onDidChangeState((event) => {
          if (event.newState === State.Running) {
            listener(true);
          } else if (event.newState === State.Stopped && event.oldState === State.Running) {
            listener(false);
          }
        });
      },
    };
  };
}

/** The palette command's target: the active editor's selection, as LSP JSON. */
export function activeTarget(): CommandTarget | undefined {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined) {
    return undefined;
  }
  const { document, selection } = editor;
  const last = document.lineAt(document.lineCount - 1);
  const pos = (p: vscode.Position) => ({ line: p.line, character: p.character });
  const diagnostics = vscode.languages
    .getDiagnostics(document.uri)
    .filter((d) => d.range.intersection(selection) !== undefined)
    .map((d) => ({
      range: { start: pos(d.range.start), end: pos(d.range.end) },
      message: d.message,
      severity: d.severity + 1,
      code: typeof d.code === "object" ? d.code.value : d.code,
      source: d.source,
    }));
  return {
    uri: document.uri.toString(),
    range: { start: pos(selection.start), end: pos(selection.end) },
    fullRange: { start: { line: 0, character: 0 }, end: pos(last.range.end) },
    diagnostics,
  };
}
