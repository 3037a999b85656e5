import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { nodeRunner } from "../../src/processRunner";

const node = process.execPath;

describe("process runner", () => {
  it("collects the exit code, stdout and stderr", async () => {
    const run = await nodeRunner.run(
      {
        command: node,
        args: ["-e", "console.log('out'); console.error('err'); process.exit(3)"],
        env: process.env,
      },
      10_000,
    );
    assert.equal(run.code, 3);
    assert.equal(run.stdout.trim(), "out");
    assert.equal(run.stderr.trim(), "err");
    assert.equal(run.spawnError, undefined);
  });

  it("reports a program that does not exist instead of throwing", async () => {
    const run = await nodeRunner.run({ command: "/nonexistent/python3", args: [], env: process.env }, 10_000);
    assert.equal(run.code, null);
    assert.match(run.spawnError ?? "", /ENOENT/);
  });

  it("kills a process that outlives its time limit", async () => {
    const started = Date.now();
    const run = await nodeRunner.run(
      { command: node, args: ["-e", "setTimeout(() => {}, 60000)"], env: process.env },
      300,
    );
    assert.match(run.spawnError ?? "", /timed out after 0.3 s/);
    assert.ok(Date.now() - started < 5_000);
  });
});
