/** Entry point: wires VS Code's events to the ServerController. */

import * as vscode from "vscode";
import { ServerController } from "./controller";
import { PALETTE_COMMANDS, SHOW_REPORT_PALETTE } from "./serverCommands";
import type { Manifest } from "./settings";
import { RESTART_COMMAND, SHOW_OUTPUT_COMMAND } from "./status";
import { nodeRunner } from "./processRunner";
import { activeTarget, CLIENT_NAME, languageClientFactory, VscodeHost } from "./vscodeApi";

let controller: ServerController | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel(CLIENT_NAME);
  const statusItem = vscode.window.createStatusBarItem("stitch.status", vscode.StatusBarAlignment.Left, 0);
  statusItem.name = CLIENT_NAME;
  context.subscriptions.push(output, statusItem);

  const host = new VscodeHost(context, output, statusItem);
  const manifest = context.extension.packageJSON as Manifest;
  const ctl = new ServerController(host, nodeRunner, languageClientFactory(output), manifest);
  controller = ctl;

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
    vscode.workspace.onDidChangeConfiguration((event) => {
      void ctl.onSettingsChanged((section) => event.affectsConfiguration(section));
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      void ctl.onTrustGranted();
    }),
  );

  // Follow the Python extension's interpreter picker, when it is installed.
  try {
    const python = await host.pythonExtension();
    const onEnv =
      python?.environments?.onDidChangeActiveEnvironmentPath ?? python?.settings?.onDidChangeExecutionDetails;
    if (onEnv !== undefined) {
      context.subscriptions.push(onEnv(() => void ctl.onInterpreterMaybeChanged()));
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
