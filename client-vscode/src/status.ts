/**
 * The status bar item as a state machine: what the server process is doing (starting, ready,
 * missing, failed, stopped) combined with the last `stitch/status` notification about GPU jobs.
 * The last measured speedup stays visible until a newer result replaces it.
 */

export const STATUS_NOTIFICATION = "stitch/status";

export type JobState = "idle" | "running" | "done" | "error";

/** The Ray cluster the server's jobs run on (`stitch.cluster`), as the server last saw it. */
export interface ClusterInfo {
  address: string;
  gpus: number;
  freeGpus: number;
  error?: string;
}

export interface StatusNotification {
  state: JobState;
  message: string;
  speedup?: number;
  cluster?: ClusterInfo;
}

export type ServerPhase = "starting" | "ready" | "missing" | "failed" | "stopped";

export interface StatusView {
  text: string;
  tooltip: string;
  /** Command run on click. */
  command: string;
  kind: "normal" | "warning" | "error";
}

const JOB_STATES: readonly string[] = ["idle", "running", "done", "error"];

/** Validates a notification's params; anything malformed is dropped rather than shown. */
export function parseStatus(raw: unknown): StatusNotification | undefined {
  if (typeof raw !== "object" || raw === null) {
    return undefined;
  }
  const { state, message, speedup, cluster } = raw as Record<string, unknown>;
  if (typeof state !== "string" || !JOB_STATES.includes(state)) {
    return undefined;
  }
  const out: StatusNotification = {
    state: state as JobState,
    message: typeof message === "string" ? message : "",
  };
  if (typeof speedup === "number" && Number.isFinite(speedup) && speedup > 0) {
    out.speedup = speedup;
  }
  const info = parseCluster(cluster);
  if (info !== undefined) {
    out.cluster = info;
  }
  return out;
}

function parseCluster(raw: unknown): ClusterInfo | undefined {
  if (typeof raw !== "object" || raw === null) {
    return undefined;
  }
  const { address, gpus, freeGpus, error } = raw as Record<string, unknown>;
  if (typeof address !== "string" || typeof gpus !== "number" || typeof freeGpus !== "number") {
    return undefined;
  }
  const info: ClusterInfo = { address, gpus, freeGpus };
  if (typeof error === "string") {
    info.error = error;
  }
  return info;
}

/** ` · cluster 3/4 GPUs free` for the status text, and a tooltip line. */
function clusterParts(cluster: ClusterInfo | undefined): { text: string; tooltip: string } {
  if (cluster === undefined) {
    return { text: "", tooltip: "" };
  }
  if (cluster.error !== undefined) {
    return { text: " · cluster unreachable", tooltip: `Cluster ${cluster.address}: ${cluster.error}` };
  }
  const free = `${cluster.freeGpus}/${cluster.gpus} GPUs free`;
  return { text: ` · cluster ${free}`, tooltip: `Cluster ${cluster.address}: ${free}` };
}

export function formatSpeedup(speedup: number | string): string {
  // Non-finite numbers travel as the strings "NaN" and "Infinity" (JSON has no NaN).
  if (typeof speedup !== "number" || !Number.isFinite(speedup)) {
    return "–";
  }
  if (speedup >= 100) {
    return `${speedup.toFixed(0)}x`;
  }
  if (speedup >= 10) {
    return `${speedup.toFixed(1)}x`;
  }
  return `${speedup.toFixed(2)}x`;
}

export const SHOW_OUTPUT_COMMAND = "stitch.showOutput";
export const RESTART_COMMAND = "stitch.restartServer";

export class StatusModel {
  phase: ServerPhase = "stopped";
  detail = "";
  trusted = true;
  job: StatusNotification = { state: "idle", message: "" };
  lastSpeedup: number | undefined;

  setPhase(phase: ServerPhase, detail = ""): void {
    this.phase = phase;
    this.detail = detail;
    if (phase !== "ready") {
      // A job cannot outlive its server process.
      this.job = { state: "idle", message: "" };
    }
  }

  update(notification: StatusNotification): void {
    this.job = notification;
    if (notification.state === "done" && notification.speedup !== undefined) {
      this.lastSpeedup = notification.speedup;
    }
  }

  /** A GPU job is in flight; a restart now would kill it. */
  get busy(): boolean {
    return this.phase === "ready" && this.job.state === "running";
  }

  view(): StatusView {
    const base = "Stitch";
    switch (this.phase) {
      case "starting":
        return {
          text: `$(loading~spin) ${base}`,
          tooltip: "Starting the stitch-lsp server…",
          command: SHOW_OUTPUT_COMMAND,
          kind: "normal",
        };
      case "missing":
        return {
          text: `$(warning) ${base}: server not installed`,
          tooltip: `${this.detail}\nClick to try again.`,
          command: RESTART_COMMAND,
          kind: "warning",
        };
      case "failed":
        return {
          text: `$(error) ${base}`,
          tooltip: `${this.detail || "The stitch-lsp server failed."}\nClick to show the output.`,
          command: SHOW_OUTPUT_COMMAND,
          kind: "error",
        };
      case "stopped":
        return {
          text: `$(circle-slash) ${base}`,
          tooltip: "The stitch-lsp server is not running. Click to start it.",
          command: RESTART_COMMAND,
          kind: "normal",
        };
      case "ready":
        return this.readyView(base);
    }
  }

  private readyView(base: string): StatusView {
    const last =
      this.lastSpeedup === undefined
        ? ""
        : `Last speedup over PyTorch eager: ${formatSpeedup(this.lastSpeedup)}`;
    if (!this.trusted) {
      return {
        text: `$(shield) ${base}: analysis only`,
        tooltip:
          "This workspace is not trusted: stitch-lsp analyses files but builds, runs and profiles nothing.",
        command: SHOW_OUTPUT_COMMAND,
        kind: "normal",
      };
    }
    const { state, message, speedup } = this.job;
    const cluster = clusterParts(this.job.cluster);
    switch (state) {
      case "running":
        return {
          // A job may run on the CPU (compile-only, without a GPU): "running", not "on GPU".
          text: `$(sync~spin) ${base}: running${cluster.text ? " on the cluster" : ""}${cluster.text}`,
          tooltip: [message || "A job is running.", cluster.tooltip].filter(Boolean).join("\n"),
          command: SHOW_OUTPUT_COMMAND,
          kind: "normal",
        };
      case "error":
        return {
          text: `$(error) ${base}: failed`,
          tooltip: message || "The last job failed.",
          command: SHOW_OUTPUT_COMMAND,
          kind: "error",
        };
      case "done":
        return {
          text:
            speedup === undefined ? `$(check) ${base}: done` : `$(check) ${base} ${formatSpeedup(speedup)}`,
          tooltip: [message, last].filter(Boolean).join("\n") || "The last job finished.",
          command: SHOW_OUTPUT_COMMAND,
          kind: "normal",
        };
      case "idle":
        return {
          text:
            this.lastSpeedup === undefined
              ? `$(circuit-board) ${base}${cluster.text}`
              : `$(circuit-board) ${base} ${formatSpeedup(this.lastSpeedup)}${cluster.text}`,
          tooltip: [message || "stitch-lsp is idle.", last, cluster.tooltip].filter(Boolean).join("\n"),
          command: SHOW_OUTPUT_COMMAND,
          kind: "normal",
        };
    }
  }
}
