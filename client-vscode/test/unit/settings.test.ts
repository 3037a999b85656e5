import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  changeNeedsRestart,
  declaredSettings,
  serverSettingKeys,
  serverSettings,
  USER_LEVEL_KEYS,
  userSettings,
} from "../../src/settings";
import { loadManifest } from "../support/fakes";

const manifest = loadManifest();

describe("settings", () => {
  it("declares every setting with a description and a default", () => {
    const declared = declaredSettings(manifest);
    assert.ok(declared.size > 10);
    for (const [key, schema] of declared) {
      assert.ok(schema.description || schema.markdownDescription, `${key} has no description`);
      assert.ok("default" in schema, `${key} has no default`);
      assert.ok(schema.type, `${key} has no type`);
    }
  });

  it("declares the issue's settings: endpoint, model, key variable, coder, verify on save, device, ncu, budget, target, trace", () => {
    const keys = [...declaredSettings(manifest).keys()];
    for (const key of [
      "llmBaseUrl",
      "llmModel",
      "llmApiKeyEnv",
      "coder",
      "verifyOnSave",
      "device",
      "ncuPath",
      "ncuSections",
      "maxAttempts",
      "targetSpeedup",
      "trace.server",
      "python.interpreter",
    ]) {
      assert.ok(keys.includes(key), `stitch.${key} is not declared`);
    }
  });

  it("sends the server its keys but not the client's own", () => {
    const keys = serverSettingKeys(manifest);
    assert.ok(keys.includes("llmModel"));
    assert.ok(!keys.includes("python.interpreter"));
    assert.ok(!keys.includes("trace.server"));
  });

  it("fills defaults and turns an emptied nullable string back into null", () => {
    const values: Record<string, unknown> = { llmBaseUrl: "", llmModel: "qwen", device: "cuda:1" };
    const sent = serverSettings(manifest, (key) => values[key]);
    assert.equal(sent.llmBaseUrl, null);
    assert.equal(sent.llmModel, "qwen");
    assert.equal(sent.device, "cuda:1");
    assert.equal(sent.maxAttempts, 5);
    assert.deepEqual(sent.ncuSections, declaredSettings(manifest).get("ncuSections")?.default);
    assert.ok(!("python.interpreter" in sent));
  });

  it("restarts for the interpreter and server settings, not for the trace level", () => {
    const only = (section: string) => (s: string) => s === section;
    assert.ok(changeNeedsRestart(manifest, only("stitch.python.interpreter")));
    assert.ok(changeNeedsRestart(manifest, only("stitch.llmBaseUrl")));
    assert.ok(changeNeedsRestart(manifest, only("stitch.ncuSections")));
    assert.ok(!changeNeedsRestart(manifest, only("stitch.trace.server")));
    assert.ok(!changeNeedsRestart(manifest, only("python.defaultInterpreterPath")));
  });

  it("sends user-level values of the endpoint, key variable and output folder, and only those", () => {
    const global: Record<string, unknown> = {
      llmBaseUrl: "http://localhost:8000/v1",
      llmModel: "qwen",
      trajectoriesDir: "",
    };
    assert.deepEqual(
      userSettings((key) => global[key]),
      { llmBaseUrl: "http://localhost:8000/v1" },
    );
    assert.deepEqual(
      [...USER_LEVEL_KEYS],
      ["llmBaseUrl", "llmApiKeyEnv", "trajectoriesDir", "cluster", "pythonForWorkers", "ncuPath", "sandbox"],
    );
  });

  it("declares the endpoint, the key variable and the cluster as user-level and restricted when untrusted", () => {
    const declared = declaredSettings(manifest);
    const restricted = (manifest.capabilities?.untrustedWorkspaces as { restrictedConfigurations: string[] })
      .restrictedConfigurations;
    for (const key of ["llmBaseUrl", "llmApiKeyEnv", "cluster"]) {
      assert.equal(declared.get(key)?.scope, "application", key);
      assert.ok(restricted.includes(`stitch.${key}`), key);
    }
  });

  it("declares the programs the server runs and the sandbox as machine-scoped and restricted when untrusted", () => {
    const declared = declaredSettings(manifest);
    const restricted = (manifest.capabilities?.untrustedWorkspaces as { restrictedConfigurations: string[] })
      .restrictedConfigurations;
    for (const key of ["pythonForWorkers", "ncuPath", "sandbox"]) {
      assert.equal(declared.get(key)?.scope, "machine", key);
      assert.ok(restricted.includes(`stitch.${key}`), key);
    }
  });
});
