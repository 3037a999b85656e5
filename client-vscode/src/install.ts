/**
 * Installing the server package into the chosen interpreter: where from, the pip command line,
 * and a plain explanation when pip refuses.
 */

import * as path from "node:path";
import type { Interpreter } from "./interpreter";
import type { ProcessLaunch, RunResult } from "./serverLaunch";

export interface InstallSource {
  /** Label shown on the button. */
  label: string;
  /** What pip installs: a requirement, a wheel file or a project folder. */
  target: string;
  kind: "wheel" | "folder";
}

/** Wheel names look like `stitch_lsp-0.1.0-py3-none-any.whl`; the highest version wins. */
export function newestWheel(files: string[]): string | undefined {
  const wheels = files
    .filter((file) => /^stitch_lsp-[^-]+-.*\.whl$/.test(path.basename(file)))
    .map((file) => ({ file, version: path.basename(file).split("-")[1] }));
  wheels.sort((a, b) => compareVersions(a.version, b.version));
  return wheels.at(-1)?.file;
}

function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map((part) => Number.parseInt(part, 10) || 0);
  const pb = b.split(".").map((part) => Number.parseInt(part, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const diff = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (diff !== 0) {
      return diff;
    }
  }
  return 0;
}

/**
 * The wheel that ships inside the extension (built from the same commit, installed offline).
 * stitch-lsp is not published on PyPI, so there is no index to offer; a wheel or project folder
 * on disk can still be picked.
 */
export function installSources(bundledFiles: string[]): InstallSource[] {
  const wheel = newestWheel(bundledFiles);
  return wheel ? [{ label: "Install bundled wheel", target: wheel, kind: "wheel" }] : [];
}

/** A folder or wheel the user picked from disk. */
export function sourceFromPath(picked: string): InstallSource {
  return {
    label: path.basename(picked),
    target: picked,
    kind: picked.endsWith(".whl") ? "wheel" : "folder",
  };
}

export function pipInstall(
  interpreter: Interpreter,
  source: InstallSource,
  opts: { cwd?: string; env: Record<string, string | undefined> },
): ProcessLaunch {
  const [command, ...prefix] = interpreter.command;
  return {
    command,
    args: [...prefix, "-m", "pip", "install", "--disable-pip-version-check", source.target],
    cwd: opts.cwd,
    env: opts.env,
  };
}

/** One sentence a user can act on, from pip's exit status and output. */
export function explainInstallFailure(run: RunResult): string {
  if (run.spawnError !== undefined) {
    return `pip could not start: ${run.spawnError}`;
  }
  const output = `${run.stderr}\n${run.stdout}`;
  if (/externally-managed-environment/.test(output)) {
    return (
      "This Python is managed by the system and pip will not install into it. Create a virtual " +
      "environment (python3 -m venv .venv), select it, and install again."
    );
  }
  if (/No module named pip/.test(output)) {
    return "This Python has no pip. Install pip (python3 -m ensurepip) or pick another interpreter.";
  }
  if (/No matching distribution found|Could not find a version/.test(output)) {
    return "pip found no stitch-lsp package for this Python. Install from a wheel or a folder instead.";
  }
  const last = output.trim().split(/\r?\n/).filter(Boolean).slice(-2).join(" ");
  return `pip failed (exit ${run.code}): ${last}`;
}
