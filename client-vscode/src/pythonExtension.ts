/**
 * The parts of the Python extension's (ms-python.python) exported API that we use, typed loosely:
 * its API changed across versions, so every member is optional and every call may throw.
 */

export interface Event<T> {
  (listener: (e: T) => unknown): { dispose(): unknown };
}

export interface EnvironmentPath {
  id: string;
  path: string;
}

export interface ResolvedEnvironment {
  executable?: { uri?: { fsPath: string } };
  version?: { major?: number; minor?: number };
}

export interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: unknown): EnvironmentPath;
    resolveEnvironment(env: EnvironmentPath | string): Promise<ResolvedEnvironment | undefined>;
    onDidChangeActiveEnvironmentPath?: Event<unknown>;
  };
  /** The older API, kept by the extension for compatibility. */
  settings?: {
    getExecutionDetails(resource?: unknown): { execCommand: string[] | undefined };
    onDidChangeExecutionDetails?: Event<unknown>;
  };
}

export const PYTHON_EXTENSION_ID = "ms-python.python";
