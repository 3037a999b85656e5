/**
 * The `stitch/results` answer as the panel reads it (the server's ResultsResponse, camelCase),
 * with a validator: the panel only draws what has the right shape.
 */

export const RESULTS_METHOD = "stitch/results";

export interface AttemptRow {
  runId: string;
  attempt: number;
  stage: string;
  status: string;
  speedupVsEager?: number | null;
  speedupVsCompile?: number | null;
  rubric?: number | null;
  reward?: number | null;
  correct?: boolean | null;
  accepted: boolean;
  thisFile: boolean;
  created?: string | null;
  message: string;
  rubricItems?: RubricItem[];
}

export interface RubricItem {
  name: string;
  score: number;
  reasons: string[];
}

export interface PlanGroup {
  name: string;
  ops: string[];
  /** Per op, its 1-based line in the reference (null where the Planner did not find one). */
  lines: (number | null)[];
  rationale: string;
}

export interface Plan {
  runId: string;
  revision: number;
  summary: string;
  groups: PlanGroup[];
  steps: string[];
  risks: string[];
}

export interface KernelShare {
  name: string;
  ms: number;
  calls: number;
  share: number;
}

/** Per-forward totals of the GPU's work, as the verifier records them (no launch positions). */
export interface Timeline {
  forwards: number;
  kernels: number;
  windowMs: number;
  busyMs: number;
  busyFraction: number;
  gaps: number;
  gapMs: number;
  maxGapMs: number;
  hostMs?: number | null;
  streams: number;
  top: KernelShare[];
}

export interface Timelines {
  reference?: Timeline | null;
  candidate?: Timeline | null;
  note?: string | null;
}

export interface VerifySummary {
  status: string;
  title: string;
  message: string;
  stale: boolean;
  compileOnly: boolean;
  speedupVsEager?: number | null;
  speedupVsCompile?: number | null;
  eagerMs?: number | null;
  compiledMs?: number | null;
  candidateMs?: number | null;
  gpu?: string | null;
  maxAbsError?: number | null;
  timeline?: Timelines | null;
}

export interface KernelRow {
  name: string;
  side: "candidate" | "reference";
  durationUs?: number | null;
  smPct?: number | null;
  memoryPct?: number | null;
  dramGbS?: number | null;
  occupancyPct?: number | null;
  registers?: number | null;
  block?: number | null;
  grid?: number | null;
  bottleneck: string;
  arithmeticIntensity?: number | null;
  gflops?: number | null;
  line?: number | null;
}

export interface Roofs {
  peakGflops: number;
  peakGbS: number;
  source: string;
  gpu?: string | null;
  /** ncu's own DRAM peak from the report, when the roofs come from elsewhere. */
  ncuPeakGbS?: number | null;
}

export interface Results {
  uri: string;
  file: string;
  role: "reference" | "candidate" | "other";
  reference?: string | null;
  attempts: AttemptRow[];
  verify?: VerifySummary | null;
  kernels: KernelRow[];
  roofs?: Roofs | null;
  profileStale: boolean;
  report?: string | null;
  referenceLabel?: string | null;
  reportLabel?: string | null;
  plan?: Plan | null;
  /** Why nothing can be profiled here (no GPU, no ncu); null when it can. */
  profiler?: string | null;
  notes: string[];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const isNum = (v: unknown): v is number => typeof v === "number" && Number.isFinite(v);
const strings = (v: unknown): string[] =>
  Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : [];

function parseTimeline(raw: unknown): Timeline | null {
  if (!isObject(raw)) {
    return null;
  }
  const fields = ["forwards", "kernels", "windowMs", "busyMs", "busyFraction", "gaps", "gapMs"];
  if (!fields.every((f) => isNum(raw[f])) || (raw.windowMs as number) <= 0) {
    return null;
  }
  const top = (Array.isArray(raw.top) ? raw.top.filter(isObject) : []).filter(
    (k) => typeof k.name === "string" && isNum(k.ms) && isNum(k.calls) && isNum(k.share),
  ) as unknown as KernelShare[];
  return {
    forwards: raw.forwards as number,
    kernels: raw.kernels as number,
    windowMs: raw.windowMs as number,
    busyMs: raw.busyMs as number,
    busyFraction: raw.busyFraction as number,
    gaps: raw.gaps as number,
    gapMs: raw.gapMs as number,
    maxGapMs: isNum(raw.maxGapMs) ? raw.maxGapMs : 0,
    hostMs: isNum(raw.hostMs) ? raw.hostMs : null,
    streams: isNum(raw.streams) ? raw.streams : 1,
    top,
  };
}

function parsePlan(raw: unknown): Plan | null {
  if (!isObject(raw) || typeof raw.runId !== "string") {
    return null;
  }
  const groups = (Array.isArray(raw.groups) ? raw.groups.filter(isObject) : [])
    .filter((g) => typeof g.name === "string")
    .map((g) => {
      const ops = strings(g.ops);
      const lines = Array.isArray(g.lines) ? g.lines : [];
      return {
        name: g.name as string,
        ops,
        lines: ops.map((_, i) =>
          isNum(lines[i]) && (lines[i] as number) >= 1 ? (lines[i] as number) : null,
        ),
        rationale: typeof g.rationale === "string" ? g.rationale : "",
      };
    });
  return {
    runId: raw.runId,
    revision: isNum(raw.revision) ? raw.revision : 0,
    summary: typeof raw.summary === "string" ? raw.summary : "",
    groups,
    steps: strings(raw.steps),
    risks: strings(raw.risks),
  };
}

function parseAttempt(a: Record<string, unknown>): AttemptRow {
  const items = (Array.isArray(a.rubricItems) ? a.rubricItems.filter(isObject) : [])
    .filter((i) => typeof i.name === "string" && isNum(i.score))
    .map((i) => ({ name: i.name as string, score: i.score as number, reasons: strings(i.reasons) }));
  return { ...(a as unknown as AttemptRow), rubricItems: items };
}

/** The results, or undefined when the answer does not have the documented shape. */
export function parseResults(raw: unknown): Results | undefined {
  if (!isObject(raw) || typeof raw.uri !== "string" || typeof raw.file !== "string") {
    return undefined;
  }
  const list = (v: unknown) => (Array.isArray(v) ? v.filter(isObject) : []);
  const roofs = isObject(raw.roofs) ? raw.roofs : undefined;
  const validRoofs =
    roofs !== undefined &&
    typeof roofs.peakGflops === "number" &&
    typeof roofs.peakGbS === "number" &&
    roofs.peakGflops > 0 &&
    roofs.peakGbS > 0;
  return {
    uri: raw.uri,
    file: raw.file,
    role: raw.role === "reference" || raw.role === "candidate" ? raw.role : "other",
    reference: typeof raw.reference === "string" ? raw.reference : null,
    attempts: list(raw.attempts).map(parseAttempt),
    verify: isObject(raw.verify) ? parseVerify(raw.verify) : null,
    kernels: list(raw.kernels).filter(
      (k) => typeof k.name === "string" && (k.side === "candidate" || k.side === "reference"),
    ) as unknown as KernelRow[],
    roofs: validRoofs ? (roofs as unknown as Roofs) : null,
    profileStale: raw.profileStale === true,
    report: typeof raw.report === "string" ? raw.report : null,
    referenceLabel: typeof raw.referenceLabel === "string" ? raw.referenceLabel : null,
    reportLabel: typeof raw.reportLabel === "string" ? raw.reportLabel : null,
    plan: parsePlan(raw.plan),
    profiler: typeof raw.profiler === "string" ? raw.profiler : null,
    notes: Array.isArray(raw.notes) ? raw.notes.filter((n): n is string => typeof n === "string") : [],
  };
}

function parseVerify(raw: Record<string, unknown>): VerifySummary {
  const t = isObject(raw.timeline) ? raw.timeline : undefined;
  const timeline: Timelines | null =
    t === undefined
      ? null
      : {
          reference: parseTimeline(t.reference),
          candidate: parseTimeline(t.candidate),
          note: typeof t.note === "string" ? t.note : null,
        };
  return { ...(raw as unknown as VerifySummary), timeline };
}
