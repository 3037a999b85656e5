/** Entry point: wires VS Code's events, commands and views to the ServerController. */

import * as vscode from "vscode";
import { ServerController, VIEW_COMMANDS } from "./controller";
import type { JobInfo } from "./jobs";
import { nodeRunner } from "./processRunner";
import { PALETTE_COMMANDS, SHOW_REPORT_PALETTE } from "./serverCommands";
import type { Manifest } from "./settings";
import { RESTART_COMMAND, SHOW_OUTPUT_COMMAND } from "./status";
import { activeTarget, CLIENT_NAME, languageClientFactory, VscodeHost } from "./vscodeApi";
import {
  compareWithReference,
  JOBS_VIEW,
  JobsTree,
  notificationProgressUi,
  pickJob,
  ResultsPanel,
  showDebugInfo,
} from "./vscodeViews";

let controller: ServerController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(CLIENT_NAME, { log: true });
  const statusItem = vscode.window.createStatusBarItem("stitch.status", vscode.StatusBarAlignment.Left, 0);
  statusItem.name = CLIENT_NAME;
  context.subscriptions.push(output, statusItem);

  const host = new VscodeHost(context, output, statusItem);
  const manifest = context.extension.packageJSON as Manifest;
  const ctl = new ServerController(
    host,
    nodeRunner,
    languageClientFactory(output, notificationProgressUi),
    manifest,
  );
  controller = ctl;

  const jobsTree = new JobsTree(ctl.jobs);
  const results = new ResultsPanel(
    (method, params) => ctl.request(method, params),
    (line) => host.log(line),
    (uri) => ctl.showReport(uri, "reference"),
  );
  let jobCount = 0;
  context.subscriptions.push(
    jobsTree,
    results,
    vscode.window.createTreeView(JOBS_VIEW, { treeDataProvider: jobsTree, showCollapseAll: false }),
    ctl.onJobsChanged(() => {
      jobsTree.refresh();
      void vscode.commands.executeCommand("setContext", "stitch.jobsRunning", ctl.jobs.jobs.length > 0);
      // A job ended: what it measured belongs in the results panel.
      if (ctl.jobs.jobs.length < jobCount) {
        void results.refresh();
      }
      jobCount = ctl.jobs.jobs.length;
    }),
  );

  context.subscriptions.push(
    vscode.commands.registerCommand(RESTART_COMMAND, () => ctl.restart("asked from the command palette")),
    vscode.commands.registerCommand(SHOW_OUTPUT_COMMAND, () => output.show(true)),
    ...Object.keys(PALETTE_COMMANDS).map((id) =>
      vscode.commands.registerCommand(id, async () => {
        const target = activeTarget();
        if (target === undefined) {
          void vscode.window.showInformationMessage("Stitch: open a Python or CUDA file first.");
          return;
        }
        await ctl.runPaletteCommand(id, target);
      }),
    ),
    vscode.commands.registerCommand(SHOW_REPORT_PALETTE, () =>
      ctl.showReport(vscode.window.activeTextEditor?.document.uri.toString()),
    ),
    vscode.commands.registerCommand(VIEW_COMMANDS.showResults, (uri?: string | vscode.Uri) =>
      results.show(uri === undefined ? undefined : uri.toString()),
    ),
    vscode.commands.registerCommand(VIEW_COMMANDS.compare, (uri?: vscode.Uri) =>
      compareWithReference(uri instanceof vscode.Uri ? uri : undefined),
    ),
    vscode.commands.registerCommand(VIEW_COMMANDS.cancel, async () => {
      const jobs = ctl.jobs.jobs;
      if (jobs.length === 0) {
        void vscode.window.showInformationMessage("Stitch: no job is running.");
        return;
      }
      const job = jobs.length === 1 ? jobs[0] : await pickJob(ctl.jobs);
      if (job !== undefined) {
        await ctl.cancelJobs({ id: job.id });
      }
    }),
    // The jobs view passes its row: { job } (the inline Cancel button sits on a job's row).
    vscode.commands.registerCommand(VIEW_COMMANDS.cancelJob, (row?: { job?: JobInfo }) =>
      row?.job === undefined ? ctl.cancelJobs() : ctl.cancelJobs({ id: row.job.id }),
    ),
    vscode.commands.registerCommand(VIEW_COMMANDS.debugInfo, async () =>
      showDebugInfo(await ctl.debugInfo()),
    ),
    vscode.workspace.onDidChangeConfiguration((event) => {
      void ctl.onSettingsChanged((section) => event.affectsConfiguration(section));
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      void ctl.onTrustGranted();
    }),
  );

  // Follow the Python extension's interpreter picker for our folder, when it is installed.
  try {
    const python = await host.pythonExtension();
    if (python !== undefined) {
      context.subscriptions.push(
        python.environments.onDidChangeActiveEnvironmentPath((event) => {
          const ours = host.workspaceResource()?.toString();
          const theirs = event.resource?.uri.toString();
          if (ours === undefined || theirs === undefined || ours === theirs) {
            void ctl.onInterpreterMaybeChanged();
          }
        }),
      );
    }
  } catch (err) {
    host.log(`The Python extension's API is not available: ${String(err)}`);
  }

  void ctl.start();
}

export async function deactivate(): Promise<void> {
  await controller?.dispose();
  controller = undefined;
}
