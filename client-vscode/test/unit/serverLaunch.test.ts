import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { Interpreter } from "../../src/interpreter";
import { parseProbe, probeLaunch, serverLaunch } from "../../src/serverLaunch";
import { probeOutput } from "../support/fakes";

const conda: Interpreter = {
  command: ["conda", "run", "-n", "k", "python"],
  source: "setting",
  description: "",
};

describe("server launch", () => {
  it("runs `python -m stitch_lsp serve` after the interpreter's own arguments", () => {
    const launch = serverLaunch(conda, { cwd: "/w", env: { A: "1" } });
    assert.equal(launch.command, "conda");
    assert.deepEqual(launch.args, ["run", "-n", "k", "python", "-m", "stitch_lsp", "serve"]);
    assert.equal(launch.cwd, "/w");
    assert.equal(launch.env.A, "1");
    assert.equal(launch.env.PYTHONUNBUFFERED, "1");
  });

  it("probes with the same interpreter and folder", () => {
    const probe = probeLaunch(conda, { cwd: "/w", env: {} });
    assert.equal(probe.command, "conda");
    assert.equal(probe.args[4], "-c");
    assert.match(probe.args[5], /import stitch_lsp/);
    assert.equal(probe.cwd, "/w");
  });

  it("reads an installed server from the probe", () => {
    const result = parseProbe(probeOutput("0.1.0"), "python3");
    assert.deepEqual(result, {
      ok: true,
      python: "3.11.2",
      executable: "/usr/bin/python3",
      version: "0.1.0",
    });
  });

  it("tells a missing server, an old Python, a missing Python and a broken one apart", () => {
    const missing = parseProbe(probeOutput(undefined), "python3");
    assert.equal(missing.ok, false);
    assert.equal(!missing.ok && missing.reason, "missing-server");
    assert.match(!missing.ok ? missing.message : "", /not installed in \/usr\/bin\/python3/);

    const old = parseProbe(probeOutput("0.1.0", "3.8.10"), "python3");
    assert.equal(!old.ok && old.reason, "old-python");

    const absent = parseProbe({ code: null, stdout: "", stderr: "", spawnError: "spawn py ENOENT" }, "py");
    assert.equal(!absent.ok && absent.reason, "no-python");

    const broken = parseProbe({ code: 1, stdout: "", stderr: "Traceback\nSyntaxError: bad" }, "python2");
    assert.equal(!broken.ok && broken.reason, "broken");
    assert.match(!broken.ok ? broken.message : "", /SyntaxError/);
  });

  it("finds the JSON line among other output (e.g. a sitecustomize that prints)", () => {
    const run = probeOutput("0.2.0");
    run.stdout = `hello from sitecustomize\n${run.stdout}`;
    assert.equal(parseProbe(run, "python3").ok, true);
  });
});
