/**
 * A fake `vscode` module, enough for the bundled extension and vscode-languageclient to activate,
 * start the real server over stdio and register the server's features. Members a test does not
 * look at are stubs: events and `register*` calls return disposables, unknown classes are empty.
 */

import * as path from "node:path";

export interface Disposable {
  dispose(): void;
}

const disposable = (): Disposable => ({ dispose: () => undefined });

type Listener = (e: unknown) => unknown;

/** An event source: `event(listener)` subscribes, `fire(value)` calls every listener. */
export class FakeEmitter {
  readonly listeners: Listener[] = [];
  readonly event = (listener: Listener): Disposable => {
    this.listeners.push(listener);
    return { dispose: () => this.listeners.splice(this.listeners.indexOf(listener), 1) };
  };
  fire(value: unknown): void {
    for (const l of [...this.listeners]) {
      l(value);
    }
  }
}

class FakeUri {
  constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}
  static file(p: string): FakeUri {
    return new FakeUri("file", path.resolve(p));
  }
  static parse(value: string): FakeUri {
    return value.startsWith("file://") ? new FakeUri("file", value.slice(7)) : new FakeUri("unknown", value);
  }
  get path(): string {
    return this.fsPath;
  }
  toString(): string {
    return this.scheme === "file" ? `file://${this.fsPath}` : this.fsPath;
  }
  with(): FakeUri {
    return this;
  }
}

class FakeCodeActionKind {
  static readonly Empty = new FakeCodeActionKind("");
  static readonly QuickFix = new FakeCodeActionKind("quickfix");
  static readonly Refactor = new FakeCodeActionKind("refactor");
  static readonly Source = new FakeCodeActionKind("source");
  constructor(readonly value: string) {}
  append(part: string): FakeCodeActionKind {
    return new FakeCodeActionKind(this.value ? `${this.value}.${part}` : part);
  }
  contains(other: FakeCodeActionKind): boolean {
    return this.value === "" || other.value === this.value || other.value.startsWith(`${this.value}.`);
  }
  intersects(other: FakeCodeActionKind): boolean {
    return this.contains(other) || other.contains(this);
  }
}

/** Unknown members: `on*` are events, `register*`/`create*` return disposables, others undefined. */
function withStubs<T extends object>(target: T): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      if (prop in obj) {
        return Reflect.get(obj, prop, receiver);
      }
      if (typeof prop === "string" && /^on[A-Z]/.test(prop)) {
        return () => disposable();
      }
      if (typeof prop === "string" && /^(register|create)/.test(prop)) {
        return () => ({
          ...disposable(),
          set: () => undefined,
          clear: () => undefined,
          delete: () => undefined,
        });
      }
      return undefined;
    },
  });
}

/** An open document, as much of vscode.TextDocument as the client and the palette read. */
export function fakeDocument(file: string, languageId: string, text: string) {
  const lines = text.split("\n");
  return {
    uri: FakeUri.file(file),
    fileName: file,
    languageId,
    version: 1,
    isDirty: false,
    isClosed: false,
    isUntitled: false,
    lineCount: lines.length,
    getText: () => text,
    lineAt: (line: number) => ({
      text: lines[line],
      range: { end: { line, character: lines[line].length } },
    }),
  };
}

export type FakeDocument = ReturnType<typeof fakeDocument>;

export interface FakeProgress {
  title: string;
  location: number;
  cancellable: boolean;
  reports: { message?: string; increment?: number }[];
  /** Presses the notification's Cancel button. */
  cancel(): void;
  done: boolean;
}

export interface FakeVscode {
  module: unknown;
  /** Every window.withProgress call, in order. */
  progress: FakeProgress[];
  settings: Record<string, unknown>;
  registered: Map<string, (...args: unknown[]) => unknown>;
  messages: { level: string; text: string; actions: unknown[] }[];
  output: string[];
  statusItem: { text: string; tooltip: unknown; command: unknown; visible: boolean };
  configuration: FakeEmitter;
  trusted: { value: boolean };
}

export function makeFakeVscode(opts: {
  settings: Record<string, unknown>;
  workspaceFolder: string;
  /** Open documents; the first is the active editor, with the cursor at `cursor`. */
  documents?: FakeDocument[];
  cursor?: { line: number; character: number };
  /** What the file dialog returns (a path), if anything. */
  openDialog?: () => string | undefined;
  /** Extensions by id, e.g. a fake ms-python.python with its exported API. */
  extensions?: Record<string, { isActive: boolean; exports: unknown; activate(): Promise<unknown> }>;
}): FakeVscode {
  const documents = opts.documents ?? [];
  const cursor = opts.cursor ?? { line: 0, character: 0 };
  const registered = new Map<string, (...args: unknown[]) => unknown>();
  const messages: FakeVscode["messages"] = [];
  const output: string[] = [];
  const configuration = new FakeEmitter();
  const trusted = { value: true };
  const progress: FakeProgress[] = [];
  const withProgress = (
    options: { title?: string; location: number; cancellable?: boolean },
    task: (p: { report(v: object): void }, token: unknown) => Promise<unknown>,
  ) => {
    const listeners: (() => void)[] = [];
    const token = {
      isCancellationRequested: false,
      onCancellationRequested: (l: () => void) => {
        listeners.push(l);
        return disposable();
      },
    };
    const entry: FakeProgress = {
      title: options.title ?? "",
      location: options.location,
      cancellable: options.cancellable === true,
      reports: [],
      cancel: () => {
        token.isCancellationRequested = true;
        listeners.forEach((l) => l());
      },
      done: false,
    };
    progress.push(entry);
    return Promise.resolve(task({ report: (v) => entry.reports.push(v) }, token)).finally(() => {
      entry.done = true;
    });
  };
  const settings = opts.settings;
  const statusItem = {
    text: "",
    tooltip: "" as unknown,
    command: undefined as unknown,
    name: "",
    backgroundColor: undefined as unknown,
    visible: false,
    show() {
      this.visible = true;
    },
    hide() {
      this.visible = false;
    },
    dispose: () => undefined,
  };
  const message =
    (level: string) =>
    (text: string, ...actions: unknown[]) => {
      messages.push({ level, text, actions });
      return Promise.resolve(undefined);
    };
  const channel = () => ({
    name: "Stitch CUDA",
    append: (t: string) => output.push(t),
    appendLine: (t: string) => output.push(t),
    // LogOutputChannel
    logLevel: 2,
    onDidChangeLogLevel: () => disposable(),
    trace: (t: string) => output.push(t),
    debug: (t: string) => output.push(t),
    info: (t: string) => output.push(t),
    warn: (t: string) => output.push(t),
    error: (t: string) => output.push(String(t)),
    replace: () => undefined,
    show: () => undefined,
    hide: () => undefined,
    clear: () => undefined,
    dispose: () => undefined,
  });
  const config = (section?: string) => ({
    get: (key: string, fallback?: unknown) => {
      const full = section ? `${section}.${key}` : key;
      const short = full.startsWith("stitch.") ? full.slice("stitch.".length) : undefined;
      if (full === "stitch") {
        return { ...settings };
      }
      return (short !== undefined ? settings[short] : undefined) ?? fallback;
    },
    has: () => false,
    // The fake has one level of settings: call them user-level.
    inspect: (key: string) => {
      const value = settings[key];
      return value === undefined ? undefined : { key, globalValue: value };
    },
    update: () => Promise.resolve(),
  });
  const vscode = {
    version: "1.95.0",
    StatusBarAlignment: { Left: 1, Right: 2 },
    ProgressLocation: { SourceControl: 1, Window: 10, Notification: 15 },
    TreeItemCollapsibleState: { None: 0, Collapsed: 1, Expanded: 2 },
    ViewColumn: { Active: -1, Beside: -2, One: 1, Two: 2 },
    Uri: FakeUri,
    CodeActionKind: FakeCodeActionKind,
    CancellationTokenSource: class {
      readonly token = { isCancellationRequested: false, onCancellationRequested: () => disposable() };
      cancel() {
        this.token.isCancellationRequested = true;
      }
      dispose() {}
    },
    ThemeColor: class {
      constructor(readonly id: string) {}
    },
    Disposable: class {
      constructor(private readonly fn: () => void) {}
      static from(...items: Disposable[]) {
        return { dispose: () => items.forEach((d) => d.dispose()) };
      }
      dispose() {
        this.fn();
      }
    },
    EventEmitter: class {
      private readonly inner = new FakeEmitter();
      readonly event = this.inner.event;
      fire(v: unknown) {
        this.inner.fire(v);
      }
      dispose() {}
    },
    env: withStubs({
      appName: "Visual Studio Code (fake)",
      language: "en",
      machineId: "test",
      sessionId: "test",
    }),
    window: withStubs({
      createOutputChannel: channel,
      withProgress,
      createStatusBarItem: () => statusItem,
      showOpenDialog: () => {
        const picked = opts.openDialog?.();
        return Promise.resolve(picked === undefined ? undefined : [FakeUri.file(picked)]);
      },
      showInformationMessage: message("info"),
      showWarningMessage: message("warn"),
      showErrorMessage: message("error"),
      activeTextEditor:
        documents.length > 0
          ? { document: documents[0], selection: { start: cursor, end: cursor } }
          : undefined,
      visibleTextEditors: [],
      tabGroups: { all: [], onDidChangeTabs: () => disposable(), onDidChangeTabGroups: () => disposable() },
    }),
    commands: withStubs({
      registerCommand: (id: string, fn: (...args: unknown[]) => unknown) => {
        if (registered.has(id)) {
          throw new Error(`command '${id}' already exists`);
        }
        registered.set(id, fn);
        return { dispose: () => registered.delete(id) };
      },
      executeCommand: () => Promise.resolve(undefined),
    }),
    workspace: withStubs({
      get isTrusted() {
        return trusted.value;
      },
      workspaceFolders: [{ uri: FakeUri.file(opts.workspaceFolder), name: "fixtures", index: 0 }],
      getWorkspaceFolder: () => undefined,
      textDocuments: documents,
      notebookDocuments: [],
      getConfiguration: config,
      createFileSystemWatcher: () => ({
        onDidCreate: () => disposable(),
        onDidChange: () => disposable(),
        onDidDelete: () => disposable(),
        dispose: () => undefined,
      }),
      onDidChangeConfiguration: configuration.event,
    }),
    extensions: withStubs({ getExtension: (id: string) => opts.extensions?.[id] }),
    languages: withStubs({
      getDiagnostics: () => [],
      // Enough of VS Code's selector matching for vscode-languageclient to sync the documents.
      match: (selector: { scheme?: string; language?: string }[], doc: FakeDocument) =>
        selector.some(
          (f) => (!f.language || f.language === doc.languageId) && (!f.scheme || f.scheme === doc.uri.scheme),
        )
          ? 10
          : 0,
    }),
  };
  const module = new Proxy(vscode as Record<string | symbol, unknown>, {
    // vscode-languageclient subclasses VS Code's classes at load time; unknown ones are empty.
    get: (target, prop) => (prop in target ? target[prop] : class {}),
  });
  return { module, progress, settings, registered, messages, output, statusItem, configuration, trusted };
}
