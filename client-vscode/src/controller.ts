/**
 * The server's life cycle, free of the `vscode` module so that tests can drive it with fakes:
 * resolve the interpreter, probe it, offer to install the server, start the client, restart on
 * changes (after a running GPU job ends), and gate execution on workspace trust.
 *
 * Starts and stops run one at a time through a queue, so a burst of setting changes cannot start
 * two servers; restarts requested while one is waiting are merged into it.
 */

import { type Interpreter, resolveInterpreter, sameInterpreter } from "./interpreter";
import { CANCEL_SERVER_COMMAND, JOBS_METHOD, JobsModel } from "./jobs";
import {
  explainInstallFailure,
  type InstallSource,
  installSources,
  pipInstall,
  sourceFromPath,
} from "./install";
import type { PythonExtensionApi } from "./pythonExtension";
import {
  advertisedCommands,
  type CommandTarget,
  executeServerCommand,
  findServerCommand,
  PALETTE_COMMANDS,
  type RequestSender,
  SERVER_COMMANDS,
  SHOW_REPORT_COMMAND,
  SHOW_REPORT_PALETTE,
  type ServerCapabilitiesLike,
  type ServerCommandName,
} from "./serverCommands";
import {
  type InitializationOptions,
  initializationOptions,
  type ProcessLaunch,
  parseProbe,
  probeLaunch,
  type RunResult,
  serverLaunch,
} from "./serverLaunch";
import { changeNeedsRestart, INTERPRETER_KEY, type Manifest, serverSettings, userSettings } from "./settings";
import {
  parseStatus,
  RESTART_COMMAND,
  type ServerPhase,
  SHOW_OUTPUT_COMMAND,
  StatusModel,
  type StatusView,
} from "./status";

export const PROBE_TIMEOUT_MS = 30_000;
/**
 * Setting changes wait this long before a restart: typing in the settings editor changes a value
 * per keystroke, and the client's own didChangeConfiguration must go out before the old server
 * is stopped.
 */
export const RESTART_DELAY_MS = 500;
export const INSTALL_TIMEOUT_MS = 600_000;

/** When-clause key that is true while the server offers `name` (shows its palette command). */
export function commandContextKey(name: ServerCommandName | "showProfile"): string {
  return `stitch.server.${name}`;
}

export const DEBUG_INFO_METHOD = "stitch/debugInfo";

/** Commands of the extension's views (registered in extension.ts, declared in package.json). */
export const VIEW_COMMANDS = {
  showResults: "stitch.showResults",
  compare: "stitch.compareWithReference",
  cancel: "stitch.cancelJobs",
  cancelJob: "stitch.cancelJob",
  debugInfo: "stitch.showDebugInfo",
} as const;

/** Client commands the server may put in code lenses (sent in initializationOptions). */
export const LENS_CLIENT_COMMANDS: readonly string[] = [VIEW_COMMANDS.showResults];

/** Every command the extension contributes and registers. */
export const CLIENT_COMMANDS: readonly string[] = [
  ...Object.keys(PALETTE_COMMANDS),
  SHOW_REPORT_PALETTE,
  RESTART_COMMAND,
  SHOW_OUTPUT_COMMAND,
  ...Object.values(VIEW_COMMANDS),
];

export interface ClientSpec {
  launch: ProcessLaunch;
  init: InitializationOptions;
  trusted: boolean;
}

/** What the controller needs of a language client (vscode-languageclient's, or a fake). */
export interface ClientHandle extends RequestSender {
  start(): Promise<void>;
  stop(): Promise<void>;
  capabilities(): ServerCapabilitiesLike | undefined;
  onStatus(listener: (params: unknown) => void): void;
  /** `stitch/jobs` notifications: the queued and running jobs. */
  onJobs(listener: (params: unknown) => void): void;
  /** Called with false when the server process stops on its own, true when it runs again. */
  onRunningChange(listener: (running: boolean) => void): void;
}

export type ClientFactory = (spec: ClientSpec) => ClientHandle;

export interface ProcessRunner {
  run(launch: ProcessLaunch, timeoutMs: number): Promise<RunResult>;
}

export interface Ui {
  info(message: string, ...actions: string[]): Promise<string | undefined>;
  warn(message: string, ...actions: string[]): Promise<string | undefined>;
  error(message: string, ...actions: string[]): Promise<string | undefined>;
  /** Asks for a stitch-lsp wheel or project folder on disk. */
  pickInstallPath(): Promise<string | undefined>;
  /** Asks for an Nsight Compute report (.ncu-rep). */
  pickReport(): Promise<string | undefined>;
  openSettings(query: string): void;
  showOutput(): void;
}

export interface Host {
  /** A setting under `stitch.`, e.g. `python.interpreter`. */
  setting(key: string): unknown;
  /** The user-level (global) value of a setting under `stitch.`; undefined when not set there. */
  userSetting(key: string): unknown;
  isTrusted(): boolean;
  workspaceFolders(): string[];
  pythonExtension(): Promise<PythonExtensionApi | undefined>;
  /** A private, empty folder to run Python in (see launchOptions). */
  serverDirectory(): string;
  /** Files shipped in the extension's `out/bundled/` folder (`npm run package:bundled`). */
  bundledFiles(): string[];
  env: Record<string, string | undefined>;
  platform: NodeJS.Platform;
  home: string;
  log(line: string): void;
  showStatus(view: StatusView): void;
  /** Sets a when-clause context key (VS Code's `setContext`). */
  setContext(key: string, value: boolean): void;
  /**
   * The workspace folder the server belongs to (the active file's, else the first), as the
   * Python extension wants it: interpreters are chosen per folder. Undefined with no folder.
   */
  workspaceResource(): unknown;
  ui: Ui;
}

export type PaletteOutcome = "ran" | "untrusted" | "not-running" | "not-offered" | "nothing-here" | "failed";

const OPEN_SETTINGS = "Open Settings";
const SHOW_OUTPUT = "Show Output";
const FROM_DISK = "Install from Folder or Wheel…";

const NOTHING_HERE: Record<ServerCommandName, string> = {
  generate:
    "Put the cursor in an nn.Module class (e.g. a KernelBench Model) to generate its fused CUDA implementation.",
  verify:
    "Put the cursor in a CUDA implementation (a ModelNew, or a file with a `# stitch-lsp: reference=` header).",
  profile:
    "Put the cursor in a CUDA implementation (a ModelNew, or a file with a `# stitch-lsp: reference=` header).",
  optimize:
    "Put the cursor in a CUDA implementation (a ModelNew, or a file with a `# stitch-lsp: reference=` header).",
};

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

export class ServerController {
  readonly status = new StatusModel();
  readonly jobs = new JobsModel();
  private readonly jobListeners = new Set<() => void>();
  private client: ClientHandle | undefined;
  private interpreter: Interpreter | undefined;
  private chain: Promise<void> = Promise.resolve();
  private background = new Set<Promise<unknown>>();
  private restartQueued = false;
  private pendingRestart: string | undefined;
  private delayedRestart:
    { timer: ReturnType<typeof setTimeout>; done: Promise<void>; fire: () => void } | undefined;
  private stopping = false;
  private installing = false;
  private disposed = false;

  constructor(
    private readonly host: Host,
    private readonly runner: ProcessRunner,
    private readonly createClient: ClientFactory,
    private readonly manifest: Manifest,
    private readonly restartDelayMs: number = RESTART_DELAY_MS,
  ) {}

  start(): Promise<void> {
    return this.enqueue(() => this.doStart());
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.doStop("stopped"));
  }

  async dispose(): Promise<void> {
    this.disposed = true;
    if (this.delayedRestart !== undefined) {
      clearTimeout(this.delayedRestart.timer);
      this.delayedRestart.fire();
      this.delayedRestart = undefined;
    }
    await this.stop();
  }

  restart(reason: string): Promise<void> {
    if (this.restartQueued) {
      return this.chain;
    }
    this.restartQueued = true;
    this.host.log(`Restarting the server: ${reason}.`);
    return this.enqueue(async () => {
      this.restartQueued = false;
      await this.doStop("stopped");
      await this.doStart();
    });
  }

  /**
   * Restart after a short quiet period (merging a burst of changes into one restart), or after
   * the running GPU job ends so that the job is not killed.
   */
  requestRestart(reason: string): Promise<void> {
    const previous = this.delayedRestart;
    let fire!: () => void;
    const done = new Promise<void>((resolve) => {
      fire = resolve;
    });
    const timer = setTimeout(() => {
      this.delayedRestart = undefined;
      void this.requestRestartNow(reason).then(fire);
    }, this.restartDelayMs);
    this.delayedRestart = { timer, done, fire };
    if (previous !== undefined) {
      // Superseded: whoever waits on the earlier request waits for this one.
      clearTimeout(previous.timer);
      void done.then(previous.fire);
    }
    this.track(done);
    return done;
  }

  private requestRestartNow(reason: string): Promise<void> {
    if (this.status.busy) {
      this.pendingRestart = reason;
      this.host.log(`${reason}: the server will restart when the running job ends.`);
      return Promise.resolve();
    }
    return this.restart(reason);
  }

  /** `affects` is ConfigurationChangeEvent.affectsConfiguration. */
  onSettingsChanged(affects: (section: string) => boolean): Promise<void> {
    if (!changeNeedsRestart(this.manifest, affects)) {
      return Promise.resolve();
    }
    return this.requestRestart("settings changed");
  }

  /** The Python extension's active environment changed: restart if it changes our interpreter. */
  async onInterpreterMaybeChanged(): Promise<void> {
    const next = await this.resolve(this.host.isTrusted());
    if (!sameInterpreter(next, this.interpreter)) {
      await this.requestRestart(`the interpreter is now ${next.command.join(" ")}`);
    }
  }

  onTrustGranted(): Promise<void> {
    return this.restart("the workspace is now trusted");
  }

  /** Resolves once every queued start/stop and every prompt has finished (for tests and shutdown). */
  async settled(): Promise<void> {
    for (;;) {
      const pending = [this.chain, ...this.background];
      await Promise.all(pending.map((p) => p.catch(() => undefined)));
      if (this.background.size === 0 && pending[0] === this.chain) {
        return;
      }
    }
  }

  /** Runs a palette command through the server's own code action or code lens for it. */
  async runPaletteCommand(paletteId: string, target: CommandTarget): Promise<PaletteOutcome> {
    const name = PALETTE_COMMANDS[paletteId];
    if (name === undefined) {
      throw new Error(`unknown command ${paletteId}`);
    }
    const wanted = SERVER_COMMANDS[name];
    const { ui } = this.host;
    if (!this.host.isTrusted()) {
      void ui.warn(
        `Stitch: ${name} builds and runs code, so it needs a trusted workspace. ` +
          "In this workspace stitch-lsp only analyses files.",
      );
      return "untrusted";
    }
    const client = this.client;
    if (client === undefined || this.status.phase !== "ready") {
      this.offerOutput(ui.warn("Stitch: the stitch-lsp server is not running.", SHOW_OUTPUT));
      return "not-running";
    }
    const capabilities = client.capabilities() ?? {};
    if (!advertisedCommands(capabilities).includes(wanted)) {
      void ui.warn(`Stitch: this stitch-lsp server does not offer ${wanted}.`);
      return "not-offered";
    }
    try {
      const cmd = await findServerCommand(client, capabilities, target, wanted);
      if (cmd === undefined) {
        void ui.info(`Stitch: nothing to ${name} here. ${NOTHING_HERE[name]}`);
        return "nothing-here";
      }
      this.host.log(`Running "${cmd.title}" (${cmd.command}).`);
      const result = await executeServerCommand(client, cmd);
      if (result !== null && result !== undefined) {
        this.host.log(`${cmd.command} returned ${JSON.stringify(result)}`);
      }
      return "ran";
    } catch (err) {
      this.host.log(`${wanted} failed: ${message(err)}`);
      this.offerOutput(ui.error(`Stitch: ${name} failed: ${message(err)}`, SHOW_OUTPUT));
      return "failed";
    }
  }

  /** Called whenever the jobs list changes (the jobs view and the results panel listen). */
  onJobsChanged(listener: () => void): { dispose(): void } {
    this.jobListeners.add(listener);
    return { dispose: () => this.jobListeners.delete(listener) };
  }

  /** A request to the running server; rejects when there is none. */
  request(method: string, params: unknown): Promise<unknown> {
    const client = this.client;
    if (client === undefined || this.status.phase !== "ready") {
      return Promise.reject(new Error("the stitch-lsp server is not running"));
    }
    return client.sendRequest(method, params);
  }

  /** The server's `stitch/debugInfo`, with what the client knows added. */
  async debugInfo(): Promise<Record<string, unknown>> {
    const client: Record<string, unknown> = {
      phase: this.status.phase,
      interpreter: this.interpreter?.command ?? null,
      interpreterSource: this.interpreter?.description ?? null,
      trusted: this.host.isTrusted(),
    };
    try {
      return { client, server: await this.request(DEBUG_INFO_METHOD, {}) };
    } catch (err) {
      return { client, server: null, error: message(err) };
    }
  }

  /**
   * Cancels jobs through the server's `stitch.cancel`: one job (`{id}`), a file's jobs (`{uri}`)
   * or, with no argument, every job. Returns the ids the server cancelled.
   */
  async cancelJobs(which?: { id: number } | { uri: string }): Promise<number[]> {
    const client = this.client;
    if (client === undefined || this.status.phase !== "ready") {
      void this.host.ui.warn("Stitch: the stitch-lsp server is not running.");
      return [];
    }
    if (!advertisedCommands(client.capabilities()).includes(CANCEL_SERVER_COMMAND)) {
      void this.host.ui.warn(`Stitch: this stitch-lsp server does not offer ${CANCEL_SERVER_COMMAND}.`);
      return [];
    }
    const result = (await executeServerCommand(client, {
      title: "Cancel",
      command: CANCEL_SERVER_COMMAND,
      arguments: which === undefined ? [] : [which],
    })) as { cancelled?: unknown } | null;
    const ids = Array.isArray(result?.cancelled) ? result.cancelled.filter((x) => typeof x === "number") : [];
    this.host.log(`Cancelled job(s): ${ids.length > 0 ? ids.join(", ") : "none"}.`);
    return ids as number[];
  }

  /**
   * Shows an existing .ncu-rep on the workspace's files through the server's `stitch.showProfile`
   * (no GPU needed, and allowed in an untrusted workspace: reading a report runs nothing).
   * `uri` is the active document, which helps the server find the report's sources.
   */
  /**
   * Asks for a `.ncu-rep` and shows it; `side: "reference"` reads it as a report of the
   * reference's Model, for the results panel of `uri` (its kernels beside the candidate's).
   */
  async showReport(
    uri: string | undefined,
    side: "candidate" | "reference" = "candidate",
  ): Promise<PaletteOutcome> {
    const { ui } = this.host;
    const client = this.client;
    if (client === undefined || this.status.phase !== "ready") {
      this.offerOutput(ui.warn("Stitch: the stitch-lsp server is not running.", SHOW_OUTPUT));
      return "not-running";
    }
    if (!advertisedCommands(client.capabilities()).includes(SHOW_REPORT_COMMAND)) {
      void ui.warn(`Stitch: this stitch-lsp server does not offer ${SHOW_REPORT_COMMAND}.`);
      return "not-offered";
    }
    const report = await ui.pickReport();
    if (report === undefined) {
      return "nothing-here";
    }
    try {
      const args =
        uri === undefined ? { report } : side === "reference" ? { uri, report, side } : { uri, report };
      const result = await executeServerCommand(client, {
        title: "Show Nsight Compute report",
        command: SHOW_REPORT_COMMAND,
        arguments: [args],
      });
      this.host.log(`${SHOW_REPORT_COMMAND} returned ${JSON.stringify(result)}`);
      return "ran";
    } catch (err) {
      this.host.log(`${SHOW_REPORT_COMMAND} failed: ${message(err)}`);
      this.offerOutput(ui.error(`Stitch: showing the report failed: ${message(err)}`, SHOW_OUTPUT));
      return "failed";
    }
  }

  /** Installs the server into the current interpreter, then starts it. */
  async install(source: InstallSource): Promise<boolean> {
    const { host } = this;
    if (!host.isTrusted()) {
      void host.ui.warn("Stitch: installing runs pip, so it needs a trusted workspace.");
      return false;
    }
    if (this.installing) {
      return false;
    }
    this.installing = true;
    try {
      const interpreter = this.interpreter ?? (await this.resolve(true));
      const launch = pipInstall(interpreter, source, this.launchOptions());
      host.log(`Installing: ${launch.command} ${launch.args.join(" ")}`);
      const run = await this.runner.run(launch, INSTALL_TIMEOUT_MS);
      for (const text of [run.stdout, run.stderr]) {
        if (text.trim()) {
          host.log(text.trimEnd());
        }
      }
      if (run.code === 0 && run.spawnError === undefined) {
        void host.ui.info(`Stitch: installed ${source.target}.`);
        await this.restart("the server was installed");
        return true;
      }
      this.offerOutput(host.ui.error(`Stitch: ${explainInstallFailure(run)}`, SHOW_OUTPUT));
      return false;
    } finally {
      this.installing = false;
    }
  }

  private enqueue(task: () => Promise<void>): Promise<void> {
    this.chain = this.chain.then(task).catch((err: unknown) => {
      this.host.log(`Internal error: ${message(err)}`);
    });
    return this.chain;
  }

  private track<T>(promise: Promise<T>): void {
    this.background.add(promise);
    void promise.finally(() => this.background.delete(promise)).catch(() => undefined);
  }

  private offerOutput(choice: Promise<string | undefined>): void {
    this.track(
      choice.then((picked) => {
        if (picked === SHOW_OUTPUT) {
          this.host.ui.showOutput();
        }
      }),
    );
  }

  private setPhase(phase: ServerPhase, detail = ""): void {
    this.status.setPhase(phase, detail);
    this.render();
  }

  private render(): void {
    this.host.showStatus(this.status.view());
  }

  /**
   * Python puts the working directory first on sys.path for `-c` and `-m`, so a workspace file
   * named like a module the server imports (`profile.py`, `json.py`, a `stitch_lsp/` folder)
   * would shadow it, and in an untrusted workspace would run. The server never reads its working
   * directory (the workspace comes from initialize), so it runs from a private folder.
   */
  private launchOptions(): { cwd?: string; env: Record<string, string | undefined> } {
    return { cwd: this.host.serverDirectory(), env: this.host.env };
  }

  private async resolve(trusted: boolean): Promise<Interpreter> {
    const { host } = this;
    let python: PythonExtensionApi | undefined;
    try {
      python = await host.pythonExtension();
    } catch (err) {
      host.log(`The Python extension could not be asked for an interpreter: ${message(err)}`);
    }
    return resolveInterpreter({
      configured: host.setting(INTERPRETER_KEY),
      trusted,
      workspaceFolders: host.workspaceFolders(),
      python,
      resource: host.workspaceResource(),
      platform: host.platform,
      env: host.env,
      home: host.home,
      log: (line) => host.log(line),
    });
  }

  private async doStart(): Promise<void> {
    if (this.disposed || this.client !== undefined) {
      return;
    }
    const { host } = this;
    const trusted = host.isTrusted();
    this.status.trusted = trusted;
    this.setPhase("starting");
    const interpreter = await this.resolve(trusted);
    this.interpreter = interpreter;
    host.log(`Python: ${interpreter.description}`);
    const options = this.launchOptions();
    const probe = parseProbe(
      await this.runner.run(probeLaunch(interpreter, options), PROBE_TIMEOUT_MS),
      interpreter.command.join(" "),
    );
    if (!probe.ok) {
      host.log(probe.message);
      if (probe.reason === "missing-server") {
        this.setPhase("missing", probe.message);
        this.track(this.offerInstall(probe.message, trusted));
      } else {
        this.setPhase("failed", probe.message);
        this.track(
          host.ui.error(`Stitch: ${probe.message}`, OPEN_SETTINGS, SHOW_OUTPUT).then((picked) => {
            if (picked === OPEN_SETTINGS) {
              host.ui.openSettings(`stitch.${INTERPRETER_KEY}`);
            } else if (picked === SHOW_OUTPUT) {
              host.ui.showOutput();
            }
          }),
        );
      }
      return;
    }
    host.log(`stitch-lsp ${probe.version} in ${probe.executable} (Python ${probe.python}).`);
    if (!trusted) {
      host.log("Untrusted workspace: analysis only; nothing is built, run or profiled.");
    }
    const settings = serverSettings(this.manifest, (key) => host.setting(key));
    const client = this.createClient({
      launch: serverLaunch(interpreter, options),
      init: initializationOptions(
        settings,
        trusted,
        userSettings((key) => host.userSetting(key)),
        LENS_CLIENT_COMMANDS,
      ),
      trusted,
    });
    client.onStatus((params) => this.onStatus(client, params));
    client.onJobs((params) => this.onJobs(client, params));
    client.onRunningChange((running) => this.onRunningChange(client, running));
    this.client = client;
    try {
      await client.start();
    } catch (err) {
      this.client = undefined;
      void client.stop().catch(() => undefined);
      const detail = `The stitch-lsp server did not start: ${message(err)}`;
      host.log(detail);
      this.setPhase("failed", detail);
      this.offerOutput(host.ui.error(`Stitch: ${detail}`, SHOW_OUTPUT));
      return;
    }
    this.setPhase("ready");
    const offered = advertisedCommands(client.capabilities());
    host.log(`Server commands: ${offered.length > 0 ? offered.join(", ") : "none"}.`);
    this.publishCommands(offered);
    // Jobs already queued (a restarted view) come with the first list.
    this.track(
      client
        .sendRequest(JOBS_METHOD, {})
        .then((params) => this.onJobs(client, params))
        .catch((err) => host.log(`${JOBS_METHOD} failed: ${message(err)}`)),
    );
  }

  /** Palette commands show only while the server offers what they run. */
  private publishCommands(offered: string[]): void {
    for (const [name, id] of Object.entries(SERVER_COMMANDS) as [ServerCommandName, string][]) {
      this.host.setContext(commandContextKey(name), offered.includes(id));
    }
    this.host.setContext(commandContextKey("showProfile"), offered.includes(SHOW_REPORT_COMMAND));
  }

  private async doStop(phase: ServerPhase): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.publishCommands([]);
    this.clearJobs();
    if (client !== undefined) {
      this.stopping = true;
      try {
        await client.stop();
      } catch (err) {
        this.host.log(`The server did not stop cleanly: ${message(err)}`);
      } finally {
        this.stopping = false;
      }
    }
    this.setPhase(phase);
  }

  private async offerInstall(problem: string, trusted: boolean): Promise<void> {
    const { ui } = this.host;
    if (!trusted) {
      const picked = await ui.warn(
        `Stitch: ${problem} Trust this workspace to install it from here, or set ` +
          "stitch.python.interpreter in your user settings to a Python that has it.",
        OPEN_SETTINGS,
      );
      if (picked === OPEN_SETTINGS) {
        ui.openSettings(`stitch.${INTERPRETER_KEY}`);
      }
      return;
    }
    const sources = installSources(this.host.bundledFiles());
    const picked = await ui.warn(
      `Stitch: ${problem} Install it?`,
      ...sources.map((s) => s.label),
      FROM_DISK,
      OPEN_SETTINGS,
    );
    if (picked === OPEN_SETTINGS) {
      ui.openSettings(`stitch.${INTERPRETER_KEY}`);
      return;
    }
    let source = sources.find((s) => s.label === picked);
    if (picked === FROM_DISK) {
      const path = await ui.pickInstallPath();
      source = path === undefined ? undefined : sourceFromPath(path);
    }
    if (source !== undefined) {
      await this.install(source);
    }
  }

  private onStatus(client: ClientHandle, params: unknown): void {
    if (client !== this.client) {
      return;
    }
    const notification = parseStatus(params);
    if (notification === undefined) {
      this.host.log(`Ignored a malformed stitch/status notification: ${JSON.stringify(params)}`);
      return;
    }
    this.status.update(notification);
    this.render();
    if (this.pendingRestart !== undefined && !this.status.busy) {
      const reason = this.pendingRestart;
      this.pendingRestart = undefined;
      void this.restart(reason);
    }
  }

  private onJobs(client: ClientHandle, params: unknown): void {
    if (client !== this.client) {
      return;
    }
    if (!this.jobs.update(params)) {
      this.host.log(`Ignored a malformed ${JOBS_METHOD} message: ${JSON.stringify(params)}`);
      return;
    }
    this.notifyJobs();
  }

  /** Forget the jobs (the server stopped: its jobs went with it). */
  private clearJobs(): void {
    if (this.jobs.jobs.length > 0) {
      this.jobs.clear();
      this.notifyJobs();
    }
  }

  private notifyJobs(): void {
    for (const listener of [...this.jobListeners]) {
      try {
        listener();
      } catch (err) {
        this.host.log(`A jobs listener failed: ${message(err)}`);
      }
    }
  }

  private onRunningChange(client: ClientHandle, running: boolean): void {
    if (client !== this.client || this.stopping) {
      return;
    }
    if (running) {
      this.setPhase("ready");
    } else {
      this.setPhase("failed", "The stitch-lsp server stopped. Click to show its output.");
    }
  }
}
