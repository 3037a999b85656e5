/**
 * Which `stitch.*` settings the server reads, and which changes need a new server process.
 *
 * package.json's `contributes.configuration` is the one list: the server reads every key there
 * except the client's own (`python.*`, `trace.*`), so adding a setting means declaring it once.
 */

export const SECTION = "stitch";

/** Keys (without `stitch.`) that only the client reads. */
export const CLIENT_ONLY_PREFIXES: readonly string[] = ["python.", "trace."];

/**
 * Settings the server takes only from user-level settings (or its own environment): the endpoint
 * and the key variable decide where code and the API key go, the workers' Python and ncu are
 * programs the server runs, the sandbox confines candidate code, and an output folder outside
 * the workspace needs the user's word. They travel as `userSettings`, read with `inspect()` so
 * a workspace's `.vscode/settings.json` cannot supply them.
 */
export const USER_LEVEL_KEYS: readonly string[] = [
  "llmBaseUrl",
  "llmApiKeyEnv",
  "trajectoriesDir",
  "cluster",
  "pythonForWorkers",
  "ncuPath",
  "sandbox",
];
export const USER_SETTINGS_KEY = "userSettings";

export const INTERPRETER_KEY = "python.interpreter";
export const TRACE_KEY = "trace.server";

export interface SettingSchema {
  type?: string | string[];
  default?: unknown;
  description?: string;
  markdownDescription?: string;
  enum?: unknown[];
  /** VS Code's setting scope; `application`: user settings only. */
  scope?: string;
}

export interface Manifest {
  contributes?: {
    commands?: { command: string; title: string; category?: string }[];
    configuration?: { properties?: Record<string, SettingSchema> };
  };
  activationEvents?: string[];
  capabilities?: Record<string, unknown>;
  engines?: Record<string, string>;
}

/** Every declared setting, keyed without the `stitch.` prefix. */
export function declaredSettings(manifest: Manifest): Map<string, SettingSchema> {
  const props = manifest.contributes?.configuration?.properties ?? {};
  const out = new Map<string, SettingSchema>();
  for (const [fullKey, schema] of Object.entries(props)) {
    if (fullKey.startsWith(`${SECTION}.`)) {
      out.set(fullKey.slice(SECTION.length + 1), schema);
    }
  }
  return out;
}

export function isClientOnly(key: string): boolean {
  return CLIENT_ONLY_PREFIXES.some((prefix) => key.startsWith(prefix));
}

/** The camelCase keys that the server's Settings model reads. */
export function serverSettingKeys(manifest: Manifest): string[] {
  return [...declaredSettings(manifest).keys()].filter((key) => !isClientOnly(key));
}

/**
 * The `settings` object sent in initializationOptions.
 * VS Code's settings editor stores an emptied nullable string as "", which the server would read
 * as a real value (an endpoint called ""), so such values go back to null.
 */
export function serverSettings(manifest: Manifest, get: (key: string) => unknown): Record<string, unknown> {
  const schemas = declaredSettings(manifest);
  const out: Record<string, unknown> = {};
  for (const key of serverSettingKeys(manifest)) {
    const schema = schemas.get(key);
    let value = get(key);
    if (value === undefined) {
      value = schema?.default;
    }
    if (value === "" && schema?.default === null) {
      value = null;
    }
    out[key] = value;
  }
  return out;
}

/**
 * The `userSettings` object: the user-level value of each USER_LEVEL_KEYS setting that the user
 * set (`inspect(key).globalValue`); keys the user did not set are left out.
 */
export function userSettings(userValue: (key: string) => unknown): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of USER_LEVEL_KEYS) {
    const value = userValue(key);
    if (value !== undefined && value !== "") {
      out[key] = value;
    }
  }
  return out;
}

/** True when a configuration change means the server must start again (new interpreter or settings). */
export function changeNeedsRestart(manifest: Manifest, affects: (section: string) => boolean): boolean {
  if (affects(`${SECTION}.${INTERPRETER_KEY}`)) {
    return true;
  }
  return serverSettingKeys(manifest).some((key) => affects(`${SECTION}.${key}`));
}
