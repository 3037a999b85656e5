/**
 * The part of the Python extension's API (ms-python.python) that picks the server's interpreter,
 * typed by Microsoft's own package `@vscode/python-extension`. Only types come from here; the
 * API object itself is fetched in vscodeApi.ts (`PythonExtension.api()`).
 */

import type { PythonExtension } from "@vscode/python-extension";

export type PythonEnvironments = Pick<
  PythonExtension["environments"],
  "getActiveEnvironmentPath" | "resolveEnvironment" | "onDidChangeActiveEnvironmentPath"
>;

export interface PythonExtensionApi {
  environments: PythonEnvironments;
}

export const PYTHON_EXTENSION_ID = "ms-python.python";
