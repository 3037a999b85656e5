import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatSpeedup, parseStatus, StatusModel } from "../../src/status";

describe("status bar", () => {
  it("validates stitch/status notifications", () => {
    assert.deepEqual(parseStatus({ state: "done", message: "ok", speedup: 1.5 }), {
      state: "done",
      message: "ok",
      speedup: 1.5,
    });
    assert.deepEqual(parseStatus({ state: "running" }), { state: "running", message: "" });
    assert.equal(parseStatus({ state: "exploded", message: "x" }), undefined);
    assert.equal(parseStatus(null), undefined);
    assert.equal(parseStatus("done"), undefined);
    assert.equal(parseStatus({ state: "done", message: "", speedup: Number.NaN })?.speedup, undefined);
    assert.equal(parseStatus({ state: "done", message: "", speedup: -1 })?.speedup, undefined);
  });

  it("goes idle -> running on the GPU -> done with the speedup, and keeps the last speedup", () => {
    const model = new StatusModel();
    model.setPhase("ready");
    assert.equal(model.view().text, "$(circuit-board) Stitch");
    model.update({ state: "running", message: "verifying 19_ReLU" });
    assert.equal(model.view().text, "$(sync~spin) Stitch: running");
    assert.equal(model.view().tooltip, "verifying 19_ReLU");
    assert.ok(model.busy);
    model.update({ state: "done", message: "correct", speedup: 1.4213 });
    assert.equal(model.view().text, "$(check) Stitch 1.42x");
    assert.ok(!model.busy);
    model.update({ state: "idle", message: "" });
    assert.equal(model.view().text, "$(circuit-board) Stitch 1.42x");
    assert.match(model.view().tooltip, /Last speedup over PyTorch eager: 1.42x/);
    model.update({ state: "error", message: "nvcc failed" });
    assert.equal(model.view().kind, "error");
    assert.equal(model.view().tooltip, "nvcc failed");
    assert.equal(model.lastSpeedup, 1.4213);
  });

  it("shows the cluster and its free GPUs when the server runs jobs there", () => {
    const cluster = { address: "ray://head:10001", gpus: 4, freeGpus: 3 };
    assert.deepEqual(parseStatus({ state: "idle", message: "", cluster })?.cluster, cluster);
    assert.equal(parseStatus({ state: "idle", message: "", cluster: { address: 1 } })?.cluster, undefined);
    const model = new StatusModel();
    model.setPhase("ready");
    model.update({ state: "idle", message: "", cluster });
    assert.equal(model.view().text, "$(circuit-board) Stitch · cluster 3/4 GPUs free");
    assert.match(model.view().tooltip, /Cluster ray:\/\/head:10001: 3\/4 GPUs free/);
    model.update({ state: "running", message: "verifying", cluster: { ...cluster, freeGpus: 2 } });
    assert.equal(model.view().text, "$(sync~spin) Stitch: running on the cluster · cluster 2/4 GPUs free");
    model.update({ state: "idle", message: "", cluster: { ...cluster, error: "connection refused" } });
    assert.equal(model.view().text, "$(circuit-board) Stitch · cluster unreachable");
  });

  it("shows the server's own state before any job, and analysis-only when untrusted", () => {
    const model = new StatusModel();
    assert.equal(model.view().command, "stitch.restartServer");
    model.setPhase("starting");
    assert.match(model.view().text, /loading~spin/);
    model.setPhase("missing", "stitch-lsp is not installed in /usr/bin/python3.");
    assert.equal(model.view().kind, "warning");
    assert.match(model.view().tooltip, /not installed/);
    model.setPhase("failed", "boom");
    assert.equal(model.view().command, "stitch.showOutput");
    model.trusted = false;
    model.setPhase("ready");
    assert.equal(model.view().text, "$(shield) Stitch: analysis only");
  });

  it("forgets a running job when its server goes away", () => {
    const model = new StatusModel();
    model.setPhase("ready");
    model.update({ state: "running", message: "" });
    model.setPhase("failed", "crashed");
    assert.ok(!model.busy);
    model.setPhase("ready");
    assert.equal(model.job.state, "idle");
  });

  it("formats speedups with sensible precision", () => {
    assert.equal(formatSpeedup(0.5), "0.50x");
    assert.equal(formatSpeedup(12.34), "12.3x");
    assert.equal(formatSpeedup(250.4), "250x");
    assert.equal(formatSpeedup("Infinity"), "–");
    assert.equal(formatSpeedup(Number.NaN), "–");
  });
});
