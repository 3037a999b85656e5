import assert from "node:assert/strict";
import { beforeEach, describe, it } from "node:test";
import { ServerController } from "../../src/controller";
import type { PythonExtensionApi } from "../../src/pythonExtension";
import type { CommandTarget } from "../../src/serverCommands";
import { ClientFactoryFake, FakeHost, FakeRunner, loadManifest } from "../support/fakes";

const manifest = loadManifest();
const target: CommandTarget = {
  uri: "file:///work/project/model.py",
  range: { start: { line: 3, character: 0 }, end: { line: 3, character: 0 } },
  fullRange: { start: { line: 0, character: 0 }, end: { line: 20, character: 0 } },
};

let host: FakeHost;
let runner: FakeRunner;
let factory: ClientFactoryFake;
let ctl: ServerController;

function only(section: string) {
  return (s: string) => s === section;
}

beforeEach(() => {
  host = new FakeHost();
  runner = new FakeRunner();
  runner.installed.set("python3", "0.1.0");
  factory = new ClientFactoryFake();
  ctl = new ServerController(host, runner, factory.create, manifest, 5);
});

describe("server controller", () => {
  it("probes python3 and starts the server with settings and trust in initializationOptions", async () => {
    host.settings = { llmModel: "qwen2.5-coder", maxAttempts: 3, llmBaseUrl: "http://evil/v1" };
    host.userSettings = { llmBaseUrl: "http://localhost:8000/v1" };
    await ctl.start();
    await ctl.settled();
    assert.equal(runner.runs[0].command, "python3");
    // Not the workspace: a workspace file must not shadow a module the server imports.
    assert.equal(runner.runs[0].cwd, host.serverDirectory());
    assert.equal(factory.last!.spec.launch.cwd, host.serverDirectory());
    const client = factory.last!;
    assert.ok(client.started);
    assert.deepEqual(client.spec.launch.args, ["-m", "stitch_lsp", "serve"]);
    assert.equal(client.spec.init.trusted, true);
    assert.equal(client.spec.init.settings.llmModel, "qwen2.5-coder");
    assert.equal(client.spec.init.settings.maxAttempts, 3);
    assert.equal(client.spec.init.settings.targetSpeedup, 1);
    // The endpoint the server may use is the user-level one, sent apart from the merged settings.
    assert.deepEqual(client.spec.init.userSettings, { llmBaseUrl: "http://localhost:8000/v1" });
    assert.equal(ctl.status.phase, "ready");
    assert.equal(host.lastView?.text, "$(circuit-board) Stitch");
    assert.match(host.logs.join("\n"), /Server commands: stitch.generate, stitch.verify/);
    assert.deepEqual(Object.fromEntries(host.contexts), {
      "stitch.server.generate": true,
      "stitch.server.verify": true,
      "stitch.server.profile": false,
      "stitch.server.optimize": false,
      "stitch.server.showProfile": false,
    });
    await ctl.stop();
    assert.ok([...host.contexts.values()].every((v) => v === false));
  });

  it("offers to install a missing server from the bundled wheel, installs it with pip, then starts it", async () => {
    runner.installed.set("python3", undefined);
    host.bundled = ["/ext/out/bundled/stitch_lsp-0.1.0-py3-none-any.whl"];
    host.ui.answers.push("Install bundled wheel");
    await ctl.start();
    await ctl.settled();
    const offer = host.ui.shown[0];
    assert.equal(offer.level, "warn");
    assert.match(offer.message, /not installed/);
    assert.deepEqual(offer.actions, [
      "Install bundled wheel",
      "Install from Folder or Wheel…",
      "Open Settings",
    ]);
    assert.deepEqual(runner.pipRuns[0].args, [
      "-m",
      "pip",
      "install",
      "--disable-pip-version-check",
      "/ext/out/bundled/stitch_lsp-0.1.0-py3-none-any.whl",
    ]);
    assert.equal(factory.running.length, 1);
    assert.equal(ctl.status.phase, "ready");
  });

  it("installs from a folder the user picks, and explains a pip refusal", async () => {
    runner.installed.set("python3", undefined);
    runner.pipResult = { code: 1, stdout: "", stderr: "error: externally-managed-environment" };
    host.ui.answers.push("Install from Folder or Wheel…");
    host.ui.pickedPath = "/src/stitch-lsp";
    await ctl.start();
    await ctl.settled();
    assert.equal(runner.pipRuns[0].args.at(-1), "/src/stitch-lsp");
    assert.match(host.ui.shown.at(-1)!.message, /virtual environment/);
    assert.equal(factory.clients.length, 0);
    assert.equal(ctl.status.phase, "missing");
  });

  it("does nothing when the install offer is dismissed", async () => {
    runner.installed.set("python3", undefined);
    await ctl.start();
    await ctl.settled();
    assert.equal(runner.pipRuns.length, 0);
    assert.equal(host.lastView?.kind, "warning");
  });

  it("says plainly when there is no Python, and points to the setting", async () => {
    runner.missingExecutables.add("python3");
    host.ui.answers.push("Open Settings");
    await ctl.start();
    await ctl.settled();
    assert.equal(ctl.status.phase, "failed");
    assert.match(host.ui.shown[0].message, /Could not run python3/);
    assert.deepEqual(host.ui.openedSettings, ["stitch.python.interpreter"]);
  });

  it("reports a server that fails to start", async () => {
    factory.failNext = new Error("Connection to server got closed");
    host.ui.answers.push("Show Output");
    await ctl.start();
    await ctl.settled();
    assert.equal(ctl.status.phase, "failed");
    assert.match(host.ui.shown[0].message, /did not start: Connection to server got closed/);
    assert.equal(host.ui.outputShown, 1);
  });

  it("restarts once for a burst of setting changes, and not for the trace level", async () => {
    await ctl.start();
    await ctl.settled();
    await ctl.onSettingsChanged(only("stitch.trace.server"));
    assert.equal(factory.clients.length, 1);
    const a = ctl.onSettingsChanged(only("stitch.llmModel"));
    const b = ctl.onSettingsChanged(only("stitch.maxAttempts"));
    const c = ctl.onSettingsChanged(only("stitch.ncuPath"));
    await Promise.all([a, b, c]);
    await ctl.settled();
    assert.equal(factory.clients.length, 2);
    assert.ok(factory.clients[0].stopped);
    assert.equal(factory.running.length, 1);
  });

  it("restarts with the new interpreter when the setting changes", async () => {
    runner.installed.set("/opt/venv/bin/python", "0.1.0");
    await ctl.start();
    host.settings["python.interpreter"] = ["/opt/venv/bin/python"];
    await ctl.onSettingsChanged(only("stitch.python.interpreter"));
    await ctl.settled();
    assert.equal(factory.last!.spec.launch.command, "/opt/venv/bin/python");
    assert.equal(factory.running.length, 1);
  });

  it("follows the Python extension's environment only when it changes the interpreter", async () => {
    let exe = "/envs/a/bin/python";
    runner.installed.set("/envs/a/bin/python", "0.1.0");
    runner.installed.set("/envs/b/bin/python", "0.1.0");
    host.python = {
      environments: {
        getActiveEnvironmentPath: () => ({ id: exe, path: exe }),
        resolveEnvironment: async () => ({ executable: { uri: { fsPath: exe } } }),
        onDidChangeActiveEnvironmentPath: () => ({ dispose: () => undefined }),
      },
    } as unknown as PythonExtensionApi;
    await ctl.start();
    await ctl.settled();
    assert.equal(factory.last!.spec.launch.command, "/envs/a/bin/python");
    await ctl.onInterpreterMaybeChanged();
    await ctl.settled();
    assert.equal(factory.clients.length, 1);
    exe = "/envs/b/bin/python";
    await ctl.onInterpreterMaybeChanged();
    await ctl.settled();
    assert.equal(factory.clients.length, 2);
    assert.equal(factory.last!.spec.launch.command, "/envs/b/bin/python");
  });

  it("waits for a running GPU job to end before restarting", async () => {
    await ctl.start();
    await ctl.settled();
    const first = factory.last!;
    first.statusListener!({ state: "running", message: "verifying" });
    assert.equal(host.lastView?.text, "$(sync~spin) Stitch: running");
    await ctl.onSettingsChanged(only("stitch.device"));
    await ctl.settled();
    assert.equal(factory.clients.length, 1);
    assert.match(host.logs.join("\n"), /will restart when the running job ends/);
    first.statusListener!({ state: "done", message: "correct", speedup: 2.5 });
    await ctl.settled();
    assert.equal(factory.clients.length, 2);
    assert.ok(first.stopped);
    assert.equal(ctl.status.lastSpeedup, 2.5);
    assert.equal(host.lastView?.text, "$(circuit-board) Stitch 2.50x");
  });

  it("ignores malformed status notifications and those of a stopped client", async () => {
    await ctl.start();
    await ctl.settled();
    const first = factory.last!;
    first.statusListener!({ state: 3 });
    assert.match(host.logs.join("\n"), /malformed stitch\/status/);
    await ctl.restart("test");
    first.statusListener!({ state: "error", message: "late" });
    assert.notEqual(ctl.status.job.message, "late");
  });

  it("marks a crashed server and recovers when the client restarts it", async () => {
    await ctl.start();
    const client = factory.last!;
    client.runningListener!(false);
    assert.equal(ctl.status.phase, "failed");
    client.runningListener!(true);
    assert.equal(ctl.status.phase, "ready");
  });

  it("in an untrusted workspace: analysis only, no install, no execution; trust restarts it", async () => {
    host.trusted = false;
    await ctl.start();
    await ctl.settled();
    assert.equal(factory.last!.spec.init.trusted, false);
    assert.equal(factory.last!.spec.trusted, false);
    assert.equal(host.lastView?.text, "$(shield) Stitch: analysis only");
    assert.equal(await ctl.runPaletteCommand("stitch.generateFusedImplementation", target), "untrusted");
    assert.ok(!factory.last!.requests.some((r) => r.method === "workspace/executeCommand"));
    assert.equal(
      await ctl.install({ kind: "wheel", label: "", target: "/w/stitch_lsp-0.1.0-py3-none-any.whl" }),
      false,
    );
    assert.equal(runner.pipRuns.length, 0);

    host.trusted = true;
    await ctl.onTrustGranted();
    await ctl.settled();
    assert.equal(factory.last!.spec.init.trusted, true);
    assert.equal(factory.running.length, 1);
  });

  it("offers no install in an untrusted workspace, only the user setting", async () => {
    host.trusted = false;
    runner.installed.set("python3", undefined);
    await ctl.start();
    await ctl.settled();
    assert.deepEqual(host.ui.shown[0].actions, ["Open Settings"]);
    assert.match(host.ui.shown[0].message, /Trust this workspace/);
  });

  it("runs a palette command through the server's code action with the server's arguments", async () => {
    factory.configure = (client) => {
      client.responder = (method) =>
        method === "textDocument/codeAction"
          ? [
              {
                title: "Generate fused CUDA implementation",
                command: { title: "Generate", command: "stitch.generate", arguments: ["x"] },
              },
            ]
          : { created: "model_stitch.py" };
    };
    await ctl.start();
    await ctl.settled();
    assert.equal(await ctl.runPaletteCommand("stitch.generateFusedImplementation", target), "ran");
    const exec = factory.last!.requests.find((r) => r.method === "workspace/executeCommand");
    assert.deepEqual(exec?.params, { command: "stitch.generate", arguments: ["x"] });
    assert.match(host.logs.join("\n"), /returned \{"created":"model_stitch.py"\}/);
  });

  it("explains why a palette command cannot run", async () => {
    assert.equal(await ctl.runPaletteCommand("stitch.verifyImplementation", target), "not-running");
    await ctl.start();
    await ctl.settled();
    assert.equal(await ctl.runPaletteCommand("stitch.profileImplementation", target), "not-offered");
    assert.match(host.ui.shown.at(-1)!.message, /does not offer stitch.profile/);
    assert.equal(await ctl.runPaletteCommand("stitch.verifyImplementation", target), "nothing-here");
    assert.match(host.ui.shown.at(-1)!.message, /ModelNew/);
    factory.last!.responder = (method) => {
      if (method === "workspace/executeCommand") {
        throw new Error("no GPU");
      }
      return [{ title: "Verify", command: "stitch.verify" }];
    };
    assert.equal(await ctl.runPaletteCommand("stitch.verifyImplementation", target), "failed");
    assert.match(host.ui.shown.at(-1)!.message, /verify failed: no GPU/);
  });

  it("shows an Nsight Compute report through stitch.showProfile, even in an untrusted workspace", async () => {
    assert.equal(await ctl.showReport(target.uri), "not-running");
    host.trusted = false;
    factory.caps = { executeCommandProvider: { commands: ["stitch.showProfile"] } };
    factory.configure = (client) => {
      client.responder = () => ({ ok: true, documents: [target.uri] });
    };
    await ctl.start();
    await ctl.settled();
    assert.equal(host.contexts.get("stitch.server.showProfile"), true);
    assert.equal(await ctl.showReport(target.uri), "nothing-here"); // the file dialog was dismissed
    host.ui.pickedReport = "/reports/relu.ncu-rep";
    assert.equal(await ctl.showReport(target.uri), "ran");
    assert.equal(await ctl.showReport(undefined), "ran");
    const execs = factory.last!.requests.filter((r) => r.method === "workspace/executeCommand");
    assert.deepEqual(
      execs.map((r) => r.params),
      [
        { command: "stitch.showProfile", arguments: [{ uri: target.uri, report: "/reports/relu.ncu-rep" }] },
        { command: "stitch.showProfile", arguments: [{ report: "/reports/relu.ncu-rep" }] },
      ],
    );
  });

  it("does not offer a report command the server lacks", async () => {
    await ctl.start();
    await ctl.settled();
    assert.equal(await ctl.showReport(target.uri), "not-offered");
  });

  it("stops the server on dispose and starts nothing afterwards", async () => {
    await ctl.start();
    await ctl.dispose();
    assert.ok(factory.last!.stopped);
    await ctl.start();
    await ctl.settled();
    assert.equal(factory.clients.length, 1);
  });
  it("keeps the server's job list, asks for it at start, and forgets it when the server stops", async () => {
    const job = {
      id: 7,
      kind: "verify",
      title: "stitch: verifying m.py",
      file: "m.py",
      state: "running",
      stage: "building",
      submittedAt: 1,
      elapsedS: 3,
    };
    factory.configure = (client) => {
      client.responder = (method) => (method === "stitch/jobs" ? { jobs: [job] } : null);
    };
    let changes = 0;
    ctl.onJobsChanged(() => (changes += 1));
    await ctl.start();
    await ctl.settled();
    const client = factory.last!;
    assert.deepEqual(client.spec.init.clientCommands, ["stitch.showResults"]);
    assert.ok(client.requests.some((r) => r.method === "stitch/jobs"));
    assert.deepEqual(
      ctl.jobs.jobs.map((j) => j.id),
      [7],
    );
    client.jobsListener!({ jobs: [] });
    assert.deepEqual(ctl.jobs.jobs, []);
    client.jobsListener!({ jobs: "garbage" });
    assert.ok(host.logs.some((l) => l.includes("Ignored a malformed stitch/jobs")));
    client.jobsListener!({ jobs: [job] });
    const before = changes;
    await ctl.stop();
    assert.deepEqual(ctl.jobs.jobs, []);
    assert.equal(changes, before + 1);
  });

  it("cancels through the server's stitch.cancel, one job or all", async () => {
    factory.caps = { executeCommandProvider: { commands: ["stitch.cancel"] } };
    factory.configure = (client) => {
      client.responder = (method, params) =>
        method === "workspace/executeCommand"
          ? { cancelled: [(params as { arguments: { id?: number }[] }).arguments[0]?.id ?? 1] }
          : null;
    };
    await ctl.start();
    await ctl.settled();
    assert.deepEqual(await ctl.cancelJobs({ id: 5 }), [5]);
    const sent = factory.last!.requests.filter((r) => r.method === "workspace/executeCommand");
    assert.deepEqual(sent.at(-1)!.params, { command: "stitch.cancel", arguments: [{ id: 5 }] });
    await ctl.cancelJobs();
    assert.deepEqual(factory.last!.requests.at(-1)!.params, { command: "stitch.cancel", arguments: [] });
  });

  it("refuses requests and cancels while no server runs, and says so", async () => {
    await assert.rejects(ctl.request("stitch/results", { uri: "file:///x.py" }), /not running/);
    assert.deepEqual(await ctl.cancelJobs(), []);
    assert.match(host.ui.shown.at(-1)!.message, /not running/);
    const info = await ctl.debugInfo();
    assert.equal(info.server, null);
    assert.match(String(info.error), /not running/);
  });

  it("adds what the client knows to the server's debug info", async () => {
    factory.configure = (client) => {
      client.responder = (method) => (method === "stitch/debugInfo" ? { torchImported: false } : null);
    };
    await ctl.start();
    await ctl.settled();
    const info = await ctl.debugInfo();
    assert.deepEqual(info.server, { torchImported: false });
    assert.equal((info.client as { phase: string }).phase, "ready");
    assert.deepEqual((info.client as { interpreter: string[] }).interpreter, ["python3"]);
  });
});
