import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { NotificationProgress, type ProgressUi } from "../../src/progress";

class FakeProgressUi implements ProgressUi {
  readonly shown: {
    title: string;
    cancellable: boolean;
    onCancel: () => void;
    reports: unknown[];
    done: boolean;
  }[] = [];
  show(
    title: string,
    cancellable: boolean,
    onCancel: () => void,
    work: (r: { report(v: unknown): void }) => Promise<void>,
  ) {
    const entry = { title, cancellable, onCancel, reports: [] as unknown[], done: false };
    this.shown.push(entry);
    void work({ report: (v) => entry.reports.push(v) }).then(() => {
      entry.done = true;
    });
  }
}

const tick = () => new Promise((r) => setImmediate(r));

describe("server progress as a cancellable notification", () => {
  it("shows begin's title, reports messages and percentage steps, and closes at end", async () => {
    const ui = new FakeProgressUi();
    const part = new NotificationProgress(ui, () => undefined);
    part.handle({ kind: "begin", title: "stitch: verifying m.py", cancellable: true, message: "starting" });
    part.handle({ kind: "report", message: "building", percentage: 10 });
    part.handle({ kind: "report", message: "timing", percentage: 60 });
    assert.equal(ui.shown.length, 1);
    assert.equal(ui.shown[0].title, "stitch: verifying m.py");
    assert.ok(ui.shown[0].cancellable);
    assert.deepEqual(ui.shown[0].reports, [
      { message: "starting", increment: undefined },
      { message: "building", increment: 10 },
      { message: "timing", increment: 50 },
    ]);
    part.handle({ kind: "end", message: "done" });
    await tick();
    assert.ok(ui.shown[0].done && part.done);
    part.handle({ kind: "report", message: "late" }); // after end: ignored
    assert.equal(ui.shown[0].reports.length, 3);
  });

  it("Cancel calls back (the extension then sends window/workDoneProgress/cancel)", () => {
    const ui = new FakeProgressUi();
    let cancelled = 0;
    const part = new NotificationProgress(ui, () => (cancelled += 1));
    part.handle({ kind: "begin", title: "ncu: profiling k.cu" });
    ui.shown[0].onCancel();
    assert.equal(cancelled, 1);
  });

  it("a report that arrives before begin is not lost", () => {
    const ui = new FakeProgressUi();
    const part = new NotificationProgress(ui, () => undefined);
    part.handle({ kind: "report", message: "early" });
    part.handle({ kind: "begin", title: "t" });
    assert.deepEqual(ui.shown[0].reports, [{ message: "early", increment: undefined }]);
  });
});
