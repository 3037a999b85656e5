/**
 * The server's jobs as the "Stitch jobs" view shows them: `stitch/jobs` notifications (and the
 * same request), validated, with elapsed times that keep counting between notifications.
 */

export const JOBS_METHOD = "stitch/jobs";
/** The server command that cancels: [] all, [{id}] one job, [{uri}] a file's jobs. */
export const CANCEL_SERVER_COMMAND = "stitch.cancel";

export interface JobInfo {
  id: number;
  kind: string;
  title: string;
  uri?: string | null;
  file?: string | null;
  device?: string | null;
  state: "queued" | "running";
  stage: string;
  submittedAt: number;
  startedAt?: number | null;
  elapsedS: number;
}

function isJob(value: unknown): value is JobInfo {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  const j = value as Record<string, unknown>;
  return (
    typeof j.id === "number" &&
    typeof j.kind === "string" &&
    typeof j.title === "string" &&
    (j.state === "queued" || j.state === "running") &&
    typeof j.elapsedS === "number"
  );
}

/** The jobs of a `stitch/jobs` message, or undefined when it is malformed. */
export function parseJobs(raw: unknown): JobInfo[] | undefined {
  if (typeof raw !== "object" || raw === null || !Array.isArray((raw as { jobs?: unknown }).jobs)) {
    return undefined;
  }
  const jobs = (raw as { jobs: unknown[] }).jobs;
  return jobs.every(isJob)
    ? jobs.map((j) => ({ ...j, stage: typeof j.stage === "string" ? j.stage : "" }))
    : undefined;
}

/** 7 -> "0:07", 125 -> "2:05", 3725 -> "1:02:05". */
export function formatElapsed(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const rest = String(s % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${rest}` : `${m}:${rest}`;
}

/** A row under a job in the jobs view. */
export interface JobDetail {
  key: "stage" | "device";
  label: string;
  description: string;
}

export class JobsModel {
  jobs: JobInfo[] = [];
  private receivedMs = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** Takes a `stitch/jobs` message; false when it was malformed (and ignored). */
  update(raw: unknown): boolean {
    const jobs = parseJobs(raw);
    if (jobs === undefined) {
      return false;
    }
    this.jobs = jobs;
    this.receivedMs = this.now();
    return true;
  }

  clear(): void {
    this.jobs = [];
  }

  get running(): boolean {
    return this.jobs.some((j) => j.state === "running");
  }

  /** Seconds since the job started (running) or was queued, as of now. */
  elapsed(job: JobInfo): number {
    return job.elapsedS + (this.now() - this.receivedMs) / 1000;
  }

  label(job: JobInfo): string {
    return job.file ? `${job.kind} ${job.file}` : job.kind;
  }

  /** One line: where, what and how long (the quick pick, and the tooltip's first line). */
  description(job: JobInfo): string {
    return `${this.where(job)} · ${this.stage(job)} · ${formatElapsed(this.elapsed(job))}`;
  }

  /**
   * The rows under a job in the sidebar view: its stage with the elapsed time, then where it
   * runs. A sidebar is narrow, so each fact gets a row of its own that starts at the left
   * instead of trailing the file name, where it was cut.
   */
  details(job: JobInfo): JobDetail[] {
    return [
      { key: "stage", label: this.stage(job), description: formatElapsed(this.elapsed(job)) },
      { key: "device", label: `on ${this.where(job)}`, description: "" },
    ];
  }

  private where(job: JobInfo): string {
    return job.device ?? "CPU";
  }

  private stage(job: JobInfo): string {
    return job.state === "queued" ? "queued" : job.stage || "running";
  }

  tooltip(job: JobInfo): string {
    return [job.title, `job ${job.id} (${job.state}) on ${job.device ?? "the CPU"}`, job.stage]
      .filter(Boolean)
      .join("\n");
  }
}
