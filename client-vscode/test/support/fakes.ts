/** Fakes for the controller's ports: a host, a process runner and language clients. */

import * as fs from "node:fs";
import * as path from "node:path";
import type { ClientHandle, ClientSpec, Host, ProcessRunner, Ui } from "../../src/controller";
import type { PythonExtensionApi } from "../../src/pythonExtension";
import type { ServerCapabilitiesLike } from "../../src/serverCommands";
import type { ProcessLaunch, RunResult } from "../../src/serverLaunch";
import type { Manifest } from "../../src/settings";
import type { StatusView } from "../../src/status";

export const EXTENSION_ROOT = path.resolve(__dirname, "..", "..", "..");

export function loadManifest(): Manifest {
  return JSON.parse(fs.readFileSync(path.join(EXTENSION_ROOT, "package.json"), "utf8")) as Manifest;
}

export class FakeUi implements Ui {
  readonly shown: { level: string; message: string; actions: string[] }[] = [];
  /** Answers to give, in order; undefined dismisses the message. */
  readonly answers: (string | undefined)[] = [];
  pickedPath: string | undefined;
  pickedReport: string | undefined;
  readonly openedSettings: string[] = [];
  outputShown = 0;

  private answer(level: string, message: string, actions: string[]): Promise<string | undefined> {
    this.shown.push({ level, message, actions });
    return Promise.resolve(this.answers.shift());
  }
  info(message: string, ...actions: string[]) {
    return this.answer("info", message, actions);
  }
  warn(message: string, ...actions: string[]) {
    return this.answer("warn", message, actions);
  }
  error(message: string, ...actions: string[]) {
    return this.answer("error", message, actions);
  }
  pickInstallPath() {
    return Promise.resolve(this.pickedPath);
  }
  pickReport() {
    return Promise.resolve(this.pickedReport);
  }
  openSettings(query: string) {
    this.openedSettings.push(query);
  }
  showOutput() {
    this.outputShown += 1;
  }
}

export class FakeHost implements Host {
  settings: Record<string, unknown> = {};
  /** User-level values (what `inspect().globalValue` gives). */
  userSettings: Record<string, unknown> = {};
  trusted = true;
  folders = ["/work/project"];
  python: PythonExtensionApi | undefined;
  bundled: string[] = [];
  env: Record<string, string | undefined> = { PATH: "/usr/bin" };
  platform: NodeJS.Platform = "linux";
  home = "/home/me";
  readonly logs: string[] = [];
  readonly views: StatusView[] = [];
  readonly contexts = new Map<string, boolean>();
  readonly ui = new FakeUi();

  setting(key: string): unknown {
    return this.settings[key];
  }
  userSetting(key: string): unknown {
    return this.userSettings[key];
  }
  isTrusted() {
    return this.trusted;
  }
  workspaceFolders() {
    return this.folders;
  }
  pythonExtension() {
    return Promise.resolve(this.python);
  }
  serverDirectory() {
    return "/home/me/.vscode/globalStorage/stitch-lsp/server-cwd";
  }
  bundledFiles() {
    return this.bundled;
  }
  log(line: string) {
    this.logs.push(line);
  }
  setContext(key: string, value: boolean) {
    this.contexts.set(key, value);
  }
  resource: unknown = "file:///work/project";
  workspaceResource() {
    return this.resource;
  }
  showStatus(view: StatusView) {
    this.views.push(view);
  }
  get lastView(): StatusView | undefined {
    return this.views.at(-1);
  }
}

export function probeOutput(version: string | undefined, python = "3.11.2"): RunResult {
  const info: Record<string, string> = { python, executable: "/usr/bin/python3" };
  if (version === undefined) {
    info.error = "ModuleNotFoundError: No module named 'stitch_lsp'";
  } else {
    info.version = version;
  }
  return { code: 0, stdout: `${JSON.stringify(info)}\n`, stderr: "" };
}

/** Answers the probe by interpreter path, and pip with a configurable result. */
export class FakeRunner implements ProcessRunner {
  readonly runs: ProcessLaunch[] = [];
  /** Interpreter executable -> stitch_lsp version (undefined: not installed). */
  installed = new Map<string, string | undefined>();
  pipResult: RunResult = { code: 0, stdout: "Successfully installed stitch-lsp-0.1.0", stderr: "" };
  missingExecutables = new Set<string>();

  run(launch: ProcessLaunch): Promise<RunResult> {
    this.runs.push(launch);
    if (this.missingExecutables.has(launch.command)) {
      return Promise.resolve({
        code: null,
        stdout: "",
        stderr: "",
        spawnError: `spawn ${launch.command} ENOENT`,
      });
    }
    if (launch.args.includes("pip")) {
      if (this.pipResult.code === 0) {
        this.installed.set(launch.command, "0.1.0");
      }
      return Promise.resolve(this.pipResult);
    }
    return Promise.resolve(probeOutput(this.installed.get(launch.command)));
  }

  get pipRuns(): ProcessLaunch[] {
    return this.runs.filter((r) => r.args.includes("pip"));
  }
}

export class FakeClient implements ClientHandle {
  started = false;
  stopped = false;
  failStart: Error | undefined;
  readonly requests: { method: string; params: unknown }[] = [];
  responder: (method: string, params: unknown) => unknown = () => null;
  statusListener: ((params: unknown) => void) | undefined;
  jobsListener: ((params: unknown) => void) | undefined;
  runningListener: ((running: boolean) => void) | undefined;

  constructor(
    readonly spec: ClientSpec,
    readonly caps: ServerCapabilitiesLike,
  ) {}

  start(): Promise<void> {
    if (this.failStart) {
      return Promise.reject(this.failStart);
    }
    this.started = true;
    return Promise.resolve();
  }
  stop(): Promise<void> {
    this.stopped = true;
    return Promise.resolve();
  }
  capabilities() {
    return this.started ? this.caps : undefined;
  }
  sendRequest(method: string, params: unknown): Promise<unknown> {
    this.requests.push({ method, params });
    return Promise.resolve(this.responder(method, params));
  }
  onStatus(listener: (params: unknown) => void) {
    this.statusListener = listener;
  }
  onJobs(listener: (params: unknown) => void) {
    this.jobsListener = listener;
  }
  onRunningChange(listener: (running: boolean) => void) {
    this.runningListener = listener;
  }
}

export class ClientFactoryFake {
  readonly clients: FakeClient[] = [];
  caps: ServerCapabilitiesLike = {
    codeActionProvider: { resolveProvider: true },
    codeLensProvider: { resolveProvider: false },
    executeCommandProvider: { commands: ["stitch.generate", "stitch.verify"] },
  };
  failNext: Error | undefined;
  configure: (client: FakeClient) => void = () => undefined;

  readonly create = (spec: ClientSpec): ClientHandle => {
    const client = new FakeClient(spec, this.caps);
    client.failStart = this.failNext;
    this.failNext = undefined;
    this.configure(client);
    this.clients.push(client);
    return client;
  };

  get last(): FakeClient | undefined {
    return this.clients.at(-1);
  }

  get running(): FakeClient[] {
    return this.clients.filter((c) => c.started && !c.stopped);
  }
}
