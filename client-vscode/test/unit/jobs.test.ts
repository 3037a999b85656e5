import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { formatElapsed, JobsModel, parseJobs } from "../../src/jobs";

const RUNNING = {
  id: 3,
  kind: "generate",
  title: "stitch: generating CUDA for layernorm_gelu.py",
  uri: "file:///w/layernorm_gelu.py",
  file: "layernorm_gelu.py",
  device: "cuda:1",
  state: "running",
  stage: "Coding attempt 2/5",
  submittedAt: 1000,
  startedAt: 1001,
  elapsedS: 61,
};

describe("jobs view model", () => {
  it("formats elapsed times as m:ss and h:mm:ss", () => {
    assert.equal(formatElapsed(0), "0:00");
    assert.equal(formatElapsed(7.9), "0:07");
    assert.equal(formatElapsed(125), "2:05");
    assert.equal(formatElapsed(3725), "1:02:05");
  });

  it("takes well-formed stitch/jobs messages and refuses malformed ones", () => {
    assert.deepEqual(parseJobs({ jobs: [] }), []);
    assert.equal(parseJobs({ jobs: [{ id: "x" }] }), undefined);
    assert.equal(parseJobs(null), undefined);
    const model = new JobsModel(() => 0);
    assert.equal(model.update({ jobs: [RUNNING] }), true);
    assert.equal(model.update({ nope: 1 }), false);
    assert.equal(model.jobs.length, 1); // the malformed message changed nothing
  });

  it("shows kind, file, device, stage and an elapsed time that keeps counting", () => {
    let now = 50_000;
    const model = new JobsModel(() => now);
    model.update({
      jobs: [
        RUNNING,
        { ...RUNNING, id: 4, kind: "verify", device: null, state: "queued", stage: "", elapsedS: 2 },
      ],
    });
    const [running, queued] = model.jobs;
    assert.equal(model.label(running), "generate layernorm_gelu.py");
    assert.equal(model.description(running), "cuda:1 · Coding attempt 2/5 · 1:01");
    now += 9_000;
    assert.equal(model.description(running), "cuda:1 · Coding attempt 2/5 · 1:10");
    assert.equal(model.description(queued), "CPU · queued · 0:11");
    assert.match(model.tooltip(running), /generating CUDA for layernorm_gelu.py/);
    assert.ok(model.running);
    model.clear();
    assert.ok(!model.running);
  });
});
