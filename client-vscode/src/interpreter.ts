/**
 * Finds the Python that runs the server: the `stitch.python.interpreter` setting, else the Python
 * extension's active environment, else `python3` (`python` on Windows) on PATH.
 *
 * In an untrusted workspace an environment that lies inside the workspace is not used: running
 * an interpreter the workspace ships would execute the workspace's code.
 */

import * as path from "node:path";
import type { PythonExtensionApi } from "./pythonExtension";

export type InterpreterSource = "setting" | "python-extension" | "path";

export interface Interpreter {
  /** argv prefix: the executable and any arguments before `-m stitch_lsp`. */
  command: string[];
  source: InterpreterSource;
  /** Why this one was chosen, for the output channel. */
  description: string;
}

export interface ResolveContext {
  configured: unknown;
  trusted: boolean;
  workspaceFolders: string[];
  python?: PythonExtensionApi;
  /** The workspace folder (a vscode.Uri) whose environment the Python extension gives. */
  resource?: unknown;
  platform: NodeJS.Platform;
  env: Record<string, string | undefined>;
  home: string;
  log?: (line: string) => void;
}

export function defaultPython(platform: NodeJS.Platform): string {
  return platform === "win32" ? "python" : "python3";
}

/** Expands `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~`. */
export function expandVariables(
  value: string,
  ctx: Pick<ResolveContext, "workspaceFolders" | "env" | "home">,
): string {
  let out = value.replace(
    /\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g,
    (_match: string, name: string, envName: string | undefined) => {
      if (name === "workspaceFolder") {
        return ctx.workspaceFolders[0] ?? "";
      }
      if (name === "userHome") {
        return ctx.home;
      }
      return ctx.env[envName ?? ""] ?? "";
    },
  );
  if (out === "~" || out.startsWith("~/") || out.startsWith("~\\")) {
    out = ctx.home + out.slice(1);
  }
  return out;
}

/** The setting is an array of strings; a plain string is accepted too. Blank entries are dropped. */
export function normalizeConfigured(value: unknown): string[] {
  const items = typeof value === "string" ? [value] : Array.isArray(value) ? value : [];
  return items
    .filter((item): item is string => typeof item === "string")
    .map((item) => item.trim())
    .filter((item) => item.length > 0);
}

/** True when `file` is one of `folders` or lies below one of them. */
export function isInside(file: string, folders: string[]): boolean {
  const target = path.resolve(file);
  return folders.some((folder) => {
    const rel = path.relative(path.resolve(folder), target);
    return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
  });
}

async function fromPythonExtension(ctx: ResolveContext): Promise<string[] | undefined> {
  const api = ctx.python;
  if (!api) {
    return undefined;
  }
  try {
    // Per workspace folder: a multi-root workspace may pick a different environment per folder.
    const active = api.environments.getActiveEnvironmentPath(ctx.resource as never);
    const resolved = await api.environments.resolveEnvironment(active);
    const exe = resolved?.executable?.uri?.fsPath ?? active?.path;
    return exe ? [exe] : undefined;
  } catch (err) {
    ctx.log?.(`The Python extension did not give an interpreter: ${String(err)}`);
    return undefined;
  }
}

export async function resolveInterpreter(ctx: ResolveContext): Promise<Interpreter> {
  const configured = normalizeConfigured(ctx.configured).map((item) => expandVariables(item, ctx));
  if (configured.length > 0) {
    return {
      command: configured,
      source: "setting",
      description: `stitch.python.interpreter: ${configured.join(" ")}`,
    };
  }
  const fromExtension = await fromPythonExtension(ctx);
  if (fromExtension) {
    if (!ctx.trusted && isInside(fromExtension[0], ctx.workspaceFolders)) {
      ctx.log?.(
        `Not using ${fromExtension[0]}: it lies inside an untrusted workspace. ` +
          "Trust the workspace, or set stitch.python.interpreter in your user settings.",
      );
    } else {
      return {
        command: fromExtension,
        source: "python-extension",
        description: `the Python extension's active environment: ${fromExtension.join(" ")}`,
      };
    }
  }
  const fallback = defaultPython(ctx.platform);
  return { command: [fallback], source: "path", description: `${fallback} on PATH` };
}

export function sameInterpreter(a: Interpreter | undefined, b: Interpreter | undefined): boolean {
  return (
    a !== undefined &&
    b !== undefined &&
    a.command.length === b.command.length &&
    a.command.every((part, i) => part === b.command[i])
  );
}
