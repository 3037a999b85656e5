/**
 * The server's command line, the probe that checks an interpreter before launching it, and the
 * initialization options. The end-to-end test starts the server through these same functions,
 * so it launches exactly what the extension launches.
 */

import type { Interpreter } from "./interpreter";

export const MIN_PYTHON: readonly [number, number] = [3, 10];

export interface ProcessLaunch {
  command: string;
  args: string[];
  cwd?: string;
  env: Record<string, string | undefined>;
}

export interface InitializationOptions {
  settings: Record<string, unknown>;
  trusted: boolean;
  /** User-level values of the settings a workspace may not set (see settings.ts). */
  userSettings: Record<string, unknown>;
  /** Client commands the server may use in code lenses (e.g. `stitch.showResults`). */
  clientCommands: string[];
}

function withEnv(base: Record<string, string | undefined>): Record<string, string | undefined> {
  // Unbuffered, UTF-8 stdio: the protocol runs over the pipes, and a stray print must not stall it.
  return { ...base, PYTHONUNBUFFERED: "1", PYTHONIOENCODING: "utf-8" };
}

/** `<python> -m stitch_lsp serve`, run in the workspace folder like the probe. */
export function serverLaunch(
  interpreter: Interpreter,
  opts: { cwd?: string; env: Record<string, string | undefined> },
): ProcessLaunch {
  const [command, ...prefix] = interpreter.command;
  return {
    command,
    args: [...prefix, "-m", "stitch_lsp", "serve"],
    cwd: opts.cwd,
    env: withEnv(opts.env),
  };
}

export function initializationOptions(
  settings: Record<string, unknown>,
  trusted: boolean,
  userSettings: Record<string, unknown> = {},
  clientCommands: readonly string[] = [],
): InitializationOptions {
  return { settings, trusted, userSettings, clientCommands: [...clientCommands] };
}

/** Prints one JSON line: the Python version and executable, and stitch_lsp's version or import error. */
export const PROBE_SCRIPT = [
  "import json, sys",
  'info = {"python": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable}',
  "try:",
  "    import stitch_lsp",
  '    info["version"] = getattr(stitch_lsp, "__version__", "unknown")',
  "except Exception as exc:",
  '    info["error"] = "%s: %s" % (type(exc).__name__, exc)',
  "print(json.dumps(info))",
].join("\n");

export function probeLaunch(
  interpreter: Interpreter,
  opts: { cwd?: string; env: Record<string, string | undefined> },
): ProcessLaunch {
  const [command, ...prefix] = interpreter.command;
  return { command, args: [...prefix, "-c", PROBE_SCRIPT], cwd: opts.cwd, env: withEnv(opts.env) };
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Set when the process could not start at all (e.g. ENOENT). */
  spawnError?: string;
}

export type ProbeResult =
  | { ok: true; python: string; executable: string; version: string }
  | {
      ok: false;
      reason: "no-python" | "old-python" | "missing-server" | "broken";
      message: string;
      python?: string;
      executable?: string;
    };

function versionAtLeast(version: string, min: readonly [number, number]): boolean {
  const [major, minor] = version.split(".").map((part) => Number.parseInt(part, 10));
  return major > min[0] || (major === min[0] && minor >= min[1]);
}

export function parseProbe(run: RunResult, shownCommand: string): ProbeResult {
  if (run.spawnError !== undefined) {
    return {
      ok: false,
      reason: "no-python",
      message: `Could not run ${shownCommand}: ${run.spawnError}`,
    };
  }
  const line = run.stdout
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l.startsWith("{"))
    .pop();
  let info: { python?: string; executable?: string; version?: string; error?: string } | undefined;
  try {
    info = line ? JSON.parse(line) : undefined;
  } catch {
    info = undefined;
  }
  if (!info?.python) {
    const detail = (run.stderr || run.stdout).trim().split(/\r?\n/).slice(-3).join(" ");
    return {
      ok: false,
      reason: "broken",
      message: `${shownCommand} is not a working Python (exit ${run.code}): ${detail || "no output"}`,
    };
  }
  const where = { python: info.python, executable: info.executable ?? shownCommand };
  if (!versionAtLeast(info.python, MIN_PYTHON)) {
    return {
      ok: false,
      reason: "old-python",
      message: `${where.executable} is Python ${info.python}; stitch-lsp needs ${MIN_PYTHON.join(".")} or newer.`,
      ...where,
    };
  }
  if (info.error !== undefined || info.version === undefined) {
    return {
      ok: false,
      reason: "missing-server",
      message: `stitch-lsp is not installed in ${where.executable} (${info.error ?? "no version"}).`,
      ...where,
    };
  }
  return { ok: true, ...where, version: info.version };
}
