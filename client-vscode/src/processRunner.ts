/** Runs a short process (the probe, pip) to completion and collects its output; never rejects. */

import { spawn } from "node:child_process";
import type { ProcessRunner } from "./controller";
import type { ProcessLaunch, RunResult } from "./serverLaunch";

export const nodeRunner: ProcessRunner = {
  run(launch: ProcessLaunch, timeoutMs: number): Promise<RunResult> {
    return new Promise((resolve) => {
      let stdout = "";
      let stderr = "";
      let settled = false;
      const finish = (result: RunResult): void => {
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          resolve(result);
        }
      };
      const child = spawn(launch.command, launch.args, {
        cwd: launch.cwd,
        env: launch.env as NodeJS.ProcessEnv,
        stdio: ["ignore", "pipe", "pipe"],
        shell: false,
      });
      const timer = setTimeout(() => {
        child.kill();
        finish({ code: null, stdout, stderr, spawnError: `timed out after ${timeoutMs / 1000} s` });
      }, timeoutMs);
      child.stdout.on("data", (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr.on("data", (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      child.on("error", (err) => finish({ code: null, stdout, stderr, spawnError: err.message }));
      child.on("close", (code) => finish({ code, stdout, stderr }));
    });
  },
};
