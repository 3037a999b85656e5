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
  notes: string[];
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
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
    attempts: list(raw.attempts) as unknown as AttemptRow[],
    verify: isObject(raw.verify) ? (raw.verify as unknown as VerifySummary) : null,
    kernels: list(raw.kernels).filter(
      (k) => typeof k.name === "string" && (k.side === "candidate" || k.side === "reference"),
    ) as unknown as KernelRow[],
    roofs: validRoofs ? (roofs as unknown as Roofs) : null,
    profileStale: raw.profileStale === true,
    report: typeof raw.report === "string" ? raw.report : null,
    notes: Array.isArray(raw.notes) ? raw.notes.filter((n): n is string => typeof n === "string") : [],
  };
}
