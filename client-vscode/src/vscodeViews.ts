/**
 * The extension's own views, bound to `vscode`: the "Stitch jobs" tree, the results webview, the
 * progress notifications and the reference diff. Their logic (what to show, the HTML, the SVG,
 * the progress protocol) lives in vscode-free modules that are tested under node.
 */

import * as crypto from "node:crypto";
import * as fs from "node:fs";
import * as vscode from "vscode";
import { referenceOf } from "./compare";
import { type JobDetail, type JobInfo, JobsModel } from "./jobs";
import type { ProgressReporter, ProgressUi } from "./progress";
import { parseResults, RESULTS_METHOD, type Results } from "./results/model";
import { parsePanelMessage, resultsPage } from "./results/page";

export const JOBS_VIEW = "stitch.jobs";
export const SHOW_RESULTS_COMMAND = "stitch.showResults";
export const COMPARE_COMMAND = "stitch.compareWithReference";
export const CANCEL_COMMAND = "stitch.cancelJobs";
export const CANCEL_JOB_COMMAND = "stitch.cancelJob";
export const DEBUG_INFO_COMMAND = "stitch.showDebugInfo";

/** Notifications with a Cancel button (window.withProgress at the Notification location). */
export const notificationProgressUi: ProgressUi = {
  show(title, cancellable, onCancel, work) {
    void vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title, cancellable },
      (progress, token) => {
        const sub = token.onCancellationRequested(onCancel);
        const reporter: ProgressReporter = { report: (value) => progress.report(value) };
        return work(reporter).finally(() => sub.dispose());
      },
    );
  },
};

/** A row of the jobs view: a job, or one of its detail rows (stage and time; device). */
type JobsNode = { job: JobInfo; detail?: JobDetail };

/**
 * The "Stitch jobs" view: one row per queued or running job, expanded, with its stage and
 * elapsed time (ticking) and its device on rows of their own.
 */
export class JobsTree implements vscode.TreeDataProvider<JobsNode>, vscode.Disposable {
  private readonly changed = new vscode.EventEmitter<JobsNode | undefined>();
  readonly onDidChangeTreeData = this.changed.event;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(private readonly model: JobsModel) {}

  refresh(): void {
    this.changed.fire(undefined);
    if (this.model.running && this.timer === undefined) {
      this.timer = setInterval(() => this.changed.fire(undefined), 1000);
    } else if (!this.model.running && this.timer !== undefined) {
      clearInterval(this.timer);
      this.timer = undefined;
    }
  }

  getTreeItem(node: JobsNode): vscode.TreeItem {
    const { job, detail } = node;
    if (detail !== undefined) {
      const item = new vscode.TreeItem(detail.label, vscode.TreeItemCollapsibleState.None);
      item.id = `${job.id}/${detail.key}`;
      item.description = detail.description;
      item.tooltip = this.model.tooltip(job);
      item.contextValue = "stitchJobDetail";
      return item;
    }
    const item = new vscode.TreeItem(this.model.label(job), vscode.TreeItemCollapsibleState.Expanded);
    item.id = String(job.id);
    item.tooltip = this.model.tooltip(job);
    item.contextValue = "stitchJob";
    item.iconPath = new vscode.ThemeIcon(job.state === "running" ? "sync~spin" : "clock");
    if (job.uri) {
      item.resourceUri = vscode.Uri.parse(job.uri);
    }
    return item;
  }

  getChildren(element?: JobsNode): JobsNode[] {
    if (element === undefined) {
      return this.model.jobs.map((job) => ({ job }));
    }
    if (element.detail !== undefined) {
      return [];
    }
    const job = this.model.jobs.find((j) => j.id === element.job.id) ?? element.job;
    return this.model.details(job).map((detail) => ({ job, detail }));
  }

  dispose(): void {
    if (this.timer !== undefined) {
      clearInterval(this.timer);
    }
    this.changed.dispose();
  }
}

/** Opens VS Code's diff editor: the reference on the left, the generated file on the right. */
export async function compareWithReference(uri?: vscode.Uri): Promise<void> {
  const target = uri ?? vscode.window.activeTextEditor?.document.uri;
  if (target === undefined || target.scheme !== "file") {
    void vscode.window.showInformationMessage(
      "Stitch: open a generated file (with a reference header) first.",
    );
    return;
  }
  const doc = await vscode.workspace.openTextDocument(target);
  const reference = referenceOf(doc.getText(), target.fsPath);
  if (reference === undefined) {
    void vscode.window.showInformationMessage(
      "Stitch: this file has no `# stitch-lsp: reference=PATH` header, so its reference is not known.",
    );
    return;
  }
  if (!fs.existsSync(reference)) {
    void vscode.window.showWarningMessage(`Stitch: the reference ${reference} does not exist.`);
    return;
  }
  const name = target.path.split("/").pop() ?? "";
  const refName = reference.split(/[\\/]/).pop() ?? "";
  await vscode.commands.executeCommand(
    "vscode.diff",
    vscode.Uri.file(reference),
    target,
    `${refName} ↔ ${name} (Stitch: reference vs generated)`,
  );
}

export type Requester = (method: string, params: unknown) => Promise<unknown>;

/** The results panel: one webview that follows the active Python file. */
export class ResultsPanel implements vscode.Disposable {
  private panel: vscode.WebviewPanel | undefined;
  private uri: string | undefined;
  private reference: string | undefined;
  /** The page last drawn, less its nonce: drawing the same page again would reload the frame. */
  private drawn: string | undefined;
  private readonly subscriptions: vscode.Disposable[] = [];

  constructor(
    private readonly request: Requester,
    private readonly log: (line: string) => void,
    /** Asks for a report of the reference of `uri` and has the server read it. */
    private readonly showReferenceReport?: (uri: string) => Promise<unknown>,
  ) {
    this.subscriptions.push(
      vscode.window.onDidChangeActiveTextEditor((editor) => {
        const doc = editor?.document;
        if (
          this.panel !== undefined &&
          doc !== undefined &&
          doc.languageId === "python" &&
          doc.uri.scheme === "file"
        ) {
          void this.show(doc.uri.toString(), false);
        }
      }),
    );
  }

  get visibleUri(): string | undefined {
    return this.panel === undefined ? undefined : this.uri;
  }

  async show(uri: string | undefined, reveal = true): Promise<void> {
    const target = uri ?? vscode.window.activeTextEditor?.document.uri.toString();
    if (reveal) {
      // The panel opens at the right, where notifications pop up: what they said (a run's
      // verdict) is in the panel, and they stay in the notification centre.
      void vscode.commands.executeCommand("notifications.hideToasts");
    }
    if (this.panel === undefined) {
      this.panel = vscode.window.createWebviewPanel(
        "stitch.results",
        "Stitch results",
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: true },
        { enableScripts: true, localResourceRoots: [], retainContextWhenHidden: false },
      );
      this.drawn = undefined;
      this.panel.onDidDispose(() => {
        this.panel = undefined;
        this.drawn = undefined;
      });
      this.panel.webview.onDidReceiveMessage((raw) => void this.onMessage(raw));
    } else if (reveal) {
      this.panel.reveal(undefined, true);
    }
    this.uri = target;
    await this.render();
  }

  /** Draws the panel again (after a job finished), when it is open. */
  async refresh(): Promise<void> {
    if (this.panel !== undefined) {
      await this.render();
    }
  }

  private async render(): Promise<void> {
    const panel = this.panel;
    if (panel === undefined) {
      return;
    }
    if (this.uri === undefined) {
      this.draw(panel, undefined, "Open a Python file with a Model or ModelNew first.");
      return;
    }
    let error: string | undefined;
    let results;
    try {
      results = parseResults(await this.request(RESULTS_METHOD, { uri: this.uri }));
      if (results === undefined) {
        error = "The server sent results in a shape this extension does not know.";
      }
    } catch (err) {
      error = `The server could not give results: ${err instanceof Error ? err.message : String(err)}`;
      this.log(error);
    }
    if (this.panel !== panel) {
      return;
    }
    panel.title = results ? `Stitch: ${results.file}` : "Stitch results";
    this.reference = results?.reference ?? undefined;
    this.draw(panel, results, error);
  }

  /**
   * Sets the page only when it changed: a new page replaces the frame, and with it the reader's
   * scroll position and sort order, so a job that changed nothing leaves the panel as it is.
   */
  private draw(panel: vscode.WebviewPanel, results: Results | undefined, error: string | undefined): void {
    const cspSource = panel.webview.cspSource;
    const key = resultsPage(results, { nonce: "", cspSource }, error);
    if (key === this.drawn) {
      return;
    }
    this.drawn = key;
    panel.webview.html = resultsPage(
      results,
      { nonce: crypto.randomBytes(16).toString("base64"), cspSource },
      error,
    );
  }

  private async onMessage(raw: unknown): Promise<void> {
    const msg = parsePanelMessage(raw);
    if (msg === undefined || this.uri === undefined) {
      return;
    }
    const uri = vscode.Uri.parse(this.uri);
    if (msg.type === "refresh") {
      await this.render();
    } else if (msg.type === "compare") {
      await compareWithReference(uri);
    } else if (msg.type === "addReferenceReport") {
      await this.addReferenceReport();
    } else {
      const file = msg.target === "reference" && this.reference ? vscode.Uri.file(this.reference) : uri;
      const doc = await vscode.workspace.openTextDocument(file);
      const pos = new vscode.Position(Math.min(msg.line - 1, doc.lineCount - 1), 0);
      await vscode.window.showTextDocument(doc, {
        viewColumn: vscode.ViewColumn.One,
        selection: new vscode.Range(pos, pos),
      });
    }
  }

  /** Asks for a report of the reference's Model and shows its kernels beside the candidate's. */
  private async addReferenceReport(): Promise<void> {
    if (this.uri === undefined || this.showReferenceReport === undefined) {
      return;
    }
    await this.showReferenceReport(this.uri);
    await this.render();
  }

  dispose(): void {
    this.panel?.dispose();
    for (const s of this.subscriptions) {
      s.dispose();
    }
  }
}

/** Shows the server's `stitch/debugInfo` answer as a JSON document. */
export async function showDebugInfo(info: unknown): Promise<void> {
  const doc = await vscode.workspace.openTextDocument({
    language: "json",
    content: JSON.stringify(info, null, 2),
  });
  await vscode.window.showTextDocument(doc, { preview: true });
}

/** Asks which job to cancel when more than one runs; undefined when the user dismissed it. */
export async function pickJob(model: JobsModel): Promise<JobInfo | undefined> {
  const picked = await vscode.window.showQuickPick(
    model.jobs.map((job) => ({ label: model.label(job), description: model.description(job), job })),
    { placeHolder: "Cancel which Stitch job?" },
  );
  return picked?.job;
}
