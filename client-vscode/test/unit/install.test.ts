import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  explainInstallFailure,
  installSources,
  newestWheel,
  pipInstall,
  sourceFromPath,
} from "../../src/install";

describe("install", () => {
  it("offers the newest bundled wheel, and no package index (stitch-lsp is not on PyPI)", () => {
    const sources = installSources([
      "/ext/bundled/stitch_lsp-0.9.0-py3-none-any.whl",
      "/ext/bundled/stitch_lsp-0.10.0-py3-none-any.whl",
      "/ext/bundled/README.txt",
    ]);
    assert.deepEqual(
      sources.map((s) => [s.kind, s.target]),
      [["wheel", "/ext/bundled/stitch_lsp-0.10.0-py3-none-any.whl"]],
    );
    assert.deepEqual(installSources([]), []);
    assert.equal(newestWheel(["other-1.0-py3-none-any.whl"]), undefined);
  });

  it("runs pip through the chosen interpreter", () => {
    const launch = pipInstall(
      { command: ["/v/bin/python"], source: "setting", description: "" },
      sourceFromPath("/src/stitch-lsp"),
      { cwd: "/w", env: {} },
    );
    assert.equal(launch.command, "/v/bin/python");
    assert.deepEqual(launch.args, ["-m", "pip", "install", "--disable-pip-version-check", "/src/stitch-lsp"]);
    assert.equal(sourceFromPath("/d/stitch_lsp-0.1.0-py3-none-any.whl").kind, "wheel");
  });

  it("explains the usual pip refusals in words a user can act on", () => {
    const run = (stderr: string) => ({ code: 1, stdout: "", stderr });
    assert.match(
      explainInstallFailure(run("error: externally-managed-environment\n")),
      /virtual environment/,
    );
    assert.match(explainInstallFailure(run("/usr/bin/python3: No module named pip")), /no pip/);
    assert.match(
      explainInstallFailure(run("ERROR: No matching distribution found for stitch-lsp")),
      /wheel or a folder/,
    );
    assert.match(explainInstallFailure(run("something\nelse broke")), /exit 1.*else broke/);
    assert.match(
      explainInstallFailure({ code: null, stdout: "", stderr: "", spawnError: "ENOENT" }),
      /could not start/,
    );
  });
});
