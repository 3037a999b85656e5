/**
 * Running the server's workspace commands from the command palette.
 *
 * The palette has no arguments to give, and the server owns their shape, so we ask the server
 * for the code actions at the cursor (then its code lenses, then the actions for the whole file)
 * and run the first one that carries the wanted command, with the arguments the server put there.
 * Everything here speaks plain LSP JSON, so the extension and the end-to-end test share it.
 */

export const SERVER_COMMANDS = {
  generate: "stitch.generate",
  verify: "stitch.verify",
  profile: "stitch.profile",
  optimize: "stitch.optimize",
} as const;

export type ServerCommandName = keyof typeof SERVER_COMMANDS;

/**
 * Loads an existing Nsight Compute report and shows its findings on the workspace's files. It runs
 * no user code, so the server offers it in untrusted workspaces too. Arguments: [{uri, report}].
 */
export const SHOW_REPORT_COMMAND = "stitch.showProfile";
export const SHOW_REPORT_PALETTE = "stitch.showNcuReport";

/** Palette command id (package.json) -> the server command it runs. */
export const PALETTE_COMMANDS: Readonly<Record<string, ServerCommandName>> = {
  "stitch.generateFusedImplementation": "generate",
  "stitch.verifyImplementation": "verify",
  "stitch.profileImplementation": "profile",
  "stitch.optimizeImplementation": "optimize",
};

export interface Position {
  line: number;
  character: number;
}

export interface Range {
  start: Position;
  end: Position;
}

export interface LspCommand {
  title: string;
  command: string;
  arguments?: unknown[];
}

export interface LspCodeAction {
  title: string;
  kind?: string;
  command?: LspCommand | string;
  edit?: unknown;
  data?: unknown;
  disabled?: { reason: string };
  diagnostics?: unknown[];
}

export interface LspCodeLens {
  range: Range;
  command?: LspCommand;
  data?: unknown;
}

export interface ServerCapabilitiesLike {
  codeActionProvider?: boolean | { resolveProvider?: boolean };
  codeLensProvider?: { resolveProvider?: boolean };
  executeCommandProvider?: { commands?: string[] };
}

export interface RequestSender {
  sendRequest(method: string, params: unknown): Promise<unknown>;
}

export interface CommandTarget {
  uri: string;
  /** The selection or cursor. */
  range: Range;
  /** The whole document. */
  fullRange: Range;
  /** Diagnostics at the cursor, as LSP JSON, for the code action context. */
  diagnostics?: unknown[];
}

export function advertisedCommands(capabilities: ServerCapabilitiesLike | undefined): string[] {
  return [...(capabilities?.executeCommandProvider?.commands ?? [])];
}

function isCommand(value: unknown): value is LspCommand {
  return typeof value === "object" && value !== null && typeof (value as LspCommand).command === "string";
}

/** A code action is either a Command or a CodeAction literal; this gives its command, if any. */
export function actionCommand(action: LspCodeAction | LspCommand): LspCommand | undefined {
  if (typeof (action as LspCommand).command === "string") {
    return action as LspCommand;
  }
  const cmd = (action as LspCodeAction).command;
  return isCommand(cmd) ? cmd : undefined;
}

async function codeActions(
  conn: RequestSender,
  capabilities: ServerCapabilitiesLike,
  target: CommandTarget,
  range: Range,
  wanted: string,
): Promise<LspCommand | undefined> {
  if (!capabilities.codeActionProvider) {
    return undefined;
  }
  const actions = ((await conn.sendRequest("textDocument/codeAction", {
    textDocument: { uri: target.uri },
    range,
    context: { diagnostics: target.diagnostics ?? [], triggerKind: 1 },
  })) ?? []) as (LspCodeAction | LspCommand)[];
  const canResolve =
    typeof capabilities.codeActionProvider === "object" &&
    capabilities.codeActionProvider.resolveProvider === true;
  for (const action of actions) {
    if ((action as LspCodeAction).disabled) {
      continue;
    }
    let cmd = actionCommand(action);
    const literal = action as LspCodeAction;
    if (!cmd && canResolve && literal.edit === undefined && literal.data !== undefined) {
      const resolved = (await conn.sendRequest("codeAction/resolve", action)) as LspCodeAction;
      cmd = resolved ? actionCommand(resolved) : undefined;
    }
    if (cmd?.command === wanted) {
      return cmd;
    }
  }
  return undefined;
}

async function codeLenses(
  conn: RequestSender,
  capabilities: ServerCapabilitiesLike,
  target: CommandTarget,
  wanted: string,
): Promise<LspCommand | undefined> {
  if (!capabilities.codeLensProvider) {
    return undefined;
  }
  const lenses = ((await conn.sendRequest("textDocument/codeLens", {
    textDocument: { uri: target.uri },
  })) ?? []) as LspCodeLens[];
  const line = target.range.start.line;
  // Nearest lens at or above the cursor first: lenses sit on the line that starts a class or kernel.
  const ordered = [...lenses].sort((a, b) => lensDistance(a, line) - lensDistance(b, line));
  for (const lens of ordered) {
    let cmd = lens.command;
    if (!cmd && capabilities.codeLensProvider.resolveProvider && lens.data !== undefined) {
      cmd = ((await conn.sendRequest("codeLens/resolve", lens)) as LspCodeLens | null)?.command;
    }
    if (cmd?.command === wanted) {
      return cmd;
    }
  }
  return undefined;
}

function lensDistance(lens: LspCodeLens, line: number): number {
  const start = lens.range.start.line;
  return start <= line ? line - start : 1_000_000 + (start - line);
}

/** The server's own invocation of `wanted` for this place in the document, if it offers one. */
export async function findServerCommand(
  conn: RequestSender,
  capabilities: ServerCapabilitiesLike,
  target: CommandTarget,
  wanted: string,
): Promise<LspCommand | undefined> {
  return (
    (await codeActions(conn, capabilities, target, target.range, wanted)) ??
    (await codeLenses(conn, capabilities, target, wanted)) ??
    (await codeActions(conn, capabilities, target, target.fullRange, wanted))
  );
}

export async function executeServerCommand(conn: RequestSender, cmd: LspCommand): Promise<unknown> {
  return conn.sendRequest("workspace/executeCommand", {
    command: cmd.command,
    arguments: cmd.arguments ?? [],
  });
}
