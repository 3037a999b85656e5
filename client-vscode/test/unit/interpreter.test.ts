import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  expandVariables,
  isInside,
  normalizeConfigured,
  type ResolveContext,
  resolveInterpreter,
  sameInterpreter,
} from "../../src/interpreter";
import type { PythonExtensionApi } from "../../src/pythonExtension";

function ctx(overrides: Partial<ResolveContext> = {}): ResolveContext {
  return {
    configured: [],
    trusted: true,
    workspaceFolders: ["/work/project"],
    platform: "linux",
    env: { CONDA_PREFIX: "/opt/conda" },
    home: "/home/me",
    ...overrides,
  };
}

function pythonApi(
  exe: string | undefined,
  opts: { throws?: boolean; seen?: unknown[] } = {},
): PythonExtensionApi {
  const api = {
    environments: {
      getActiveEnvironmentPath: (resource?: unknown) => {
        opts.seen?.push(resource);
        if (opts.throws) {
          throw new Error("not ready");
        }
        return { id: "env", path: exe ?? "" };
      },
      resolveEnvironment: async () => (exe ? { executable: { uri: { fsPath: exe } } } : undefined),
      onDidChangeActiveEnvironmentPath: () => ({ dispose: () => undefined }),
    },
  };
  return api as unknown as PythonExtensionApi;
}

describe("interpreter resolution", () => {
  it("prefers the setting and expands variables in it", async () => {
    const interp = await resolveInterpreter(
      ctx({ configured: ["${workspaceFolder}/.venv/bin/python"], python: pythonApi("/usr/bin/python3.12") }),
    );
    assert.deepEqual(interp.command, ["/work/project/.venv/bin/python"]);
    assert.equal(interp.source, "setting");
  });

  it("accepts a plain string and a multi-word command", async () => {
    assert.deepEqual((await resolveInterpreter(ctx({ configured: "~/py/bin/python" }))).command, [
      "/home/me/py/bin/python",
    ]);
    assert.deepEqual(
      (await resolveInterpreter(ctx({ configured: ["${env:CONDA_PREFIX}/bin/python", "-X", "utf8"] })))
        .command,
      ["/opt/conda/bin/python", "-X", "utf8"],
    );
  });

  it("uses the Python extension's active environment next", async () => {
    const interp = await resolveInterpreter(ctx({ python: pythonApi("/home/me/.venvs/a/bin/python") }));
    assert.deepEqual(interp.command, ["/home/me/.venvs/a/bin/python"]);
    assert.equal(interp.source, "python-extension");
  });

  it("asks the Python extension for the environment of the server's workspace folder", async () => {
    const seen: unknown[] = [];
    const folder = { fsPath: "/work/project-b", toString: () => "file:///work/project-b" };
    const interp = await resolveInterpreter(
      ctx({ python: pythonApi("/work/project-b/.venv/bin/python", { seen }), resource: folder }),
    );
    assert.deepEqual(interp.command, ["/work/project-b/.venv/bin/python"]);
    assert.deepEqual(seen, [folder]);
  });

  it("falls back to python3 on PATH (python on Windows) when the extension is absent or fails", async () => {
    const logs: string[] = [];
    const failing = await resolveInterpreter(
      ctx({ python: pythonApi("x", { throws: true }), log: (l) => logs.push(l) }),
    );
    assert.deepEqual(failing.command, ["python3"]);
    assert.equal(failing.source, "path");
    assert.match(logs.join("\n"), /not ready/);
    assert.deepEqual((await resolveInterpreter(ctx({ platform: "win32" }))).command, ["python"]);
  });

  it("does not run an environment that lives inside an untrusted workspace", async () => {
    const logs: string[] = [];
    const inside = pythonApi("/work/project/.venv/bin/python");
    const untrusted = await resolveInterpreter(
      ctx({ python: inside, trusted: false, log: (l) => logs.push(l) }),
    );
    assert.deepEqual(untrusted.command, ["python3"]);
    assert.match(logs.join("\n"), /untrusted workspace/);
    const trusted = await resolveInterpreter(ctx({ python: inside, trusted: true }));
    assert.deepEqual(trusted.command, ["/work/project/.venv/bin/python"]);
    const outside = await resolveInterpreter(
      ctx({ python: pythonApi("/usr/bin/python3.11"), trusted: false }),
    );
    assert.deepEqual(outside.command, ["/usr/bin/python3.11"]);
  });

  it("has helpers that behave at the edges", () => {
    assert.deepEqual(normalizeConfigured(["", "  ", 3, "py"]), ["py"]);
    assert.deepEqual(normalizeConfigured(undefined), []);
    assert.equal(expandVariables("${env:NOPE}/x", ctx()), "/x");
    assert.ok(isInside("/work/project", ["/work/project"]));
    assert.ok(!isInside("/work/project2/bin/python", ["/work/project"]));
    assert.ok(
      sameInterpreter(
        { command: ["a"], source: "path", description: "" },
        { command: ["a"], source: "setting", description: "" },
      ),
    );
    assert.ok(!sameInterpreter(undefined, { command: ["a"], source: "path", description: "" }));
  });
});
