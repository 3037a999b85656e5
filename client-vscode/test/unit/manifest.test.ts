import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { describe, it } from "node:test";
import { CLIENT_COMMANDS, commandContextKey } from "../../src/controller";
import { PALETTE_COMMANDS, SERVER_COMMANDS, SHOW_REPORT_PALETTE } from "../../src/serverCommands";
import { EXTENSION_ROOT, loadManifest } from "../support/fakes";

const manifest = loadManifest();

describe("package.json", () => {
  it("activates on Python and CUDA files", () => {
    const events = manifest.activationEvents ?? [];
    assert.ok(events.includes("onLanguage:python"));
    assert.ok(events.includes("onLanguage:cuda-cpp"));
  });

  it("contributes exactly the commands the extension registers, none clashing with server ids", () => {
    const contributed = (manifest.contributes?.commands ?? []).map((c) => c.command).sort();
    assert.deepEqual(contributed, [...CLIENT_COMMANDS].sort());
    const serverIds: string[] = Object.values(SERVER_COMMANDS);
    for (const id of contributed) {
      // vscode-languageclient registers the server's command ids itself; a clash would fail activation.
      assert.ok(!serverIds.includes(id), `${id} clashes with a server command`);
    }
    for (const cmd of manifest.contributes?.commands ?? []) {
      assert.equal(cmd.category, "Stitch");
    }
  });

  it("maps a palette command to each of generate, verify, profile and optimize", () => {
    assert.deepEqual(Object.values(PALETTE_COMMANDS).sort(), ["generate", "optimize", "profile", "verify"]);
  });

  it("shows each palette command only while the server offers its command", () => {
    const menus =
      (manifest.contributes as { menus?: { commandPalette?: { command: string; when?: string }[] } }).menus
        ?.commandPalette ?? [];
    for (const [id, name] of Object.entries(PALETTE_COMMANDS)) {
      const entry = menus.find((m) => m.command === id);
      assert.ok(entry?.when?.startsWith(`${commandContextKey(name)} && `), `${id}: when = ${entry?.when}`);
    }
    const report = menus.find((m) => m.command === SHOW_REPORT_PALETTE);
    assert.equal(report?.when, commandContextKey("showProfile"));
  });

  it("declares limited support for untrusted workspaces and restricts the settings that run programs", () => {
    const trust = (manifest.capabilities?.untrustedWorkspaces ?? {}) as {
      supported?: unknown;
      description?: string;
      restrictedConfigurations?: string[];
    };
    assert.equal(trust.supported, "limited");
    assert.ok(trust.description && trust.description.length > 20);
    for (const key of ["stitch.python.interpreter", "stitch.pythonForWorkers", "stitch.ncuPath"]) {
      assert.ok(trust.restrictedConfigurations?.includes(key), `${key} is not restricted`);
    }
  });

  it("bundles the client so the .vsix needs no node_modules", () => {
    const ignore = fs.readFileSync(path.join(EXTENSION_ROOT, ".vscodeignore"), "utf8");
    assert.match(ignore, /^\*\*$/m);
    assert.match(ignore, /^!out\/extension\.js$/m);
    const pkg = JSON.parse(fs.readFileSync(path.join(EXTENSION_ROOT, "package.json"), "utf8"));
    assert.equal(pkg.main, "./out/extension.js");
    assert.match(pkg.scripts.package, /--no-dependencies/);
  });

  it("keeps the vscode module behind vscodeApi.ts, vscodeViews.ts and extension.ts", () => {
    const src = path.join(EXTENSION_ROOT, "src");
    const files = (fs.readdirSync(src, { recursive: true }) as string[]).filter((f) => f.endsWith(".ts"));
    assert.ok(files.length > 10);
    for (const name of files) {
      const text = fs.readFileSync(path.join(src, name), "utf8");
      const touchesVscode = /from "vscode"|from "vscode-languageclient|from "@vscode\/python-extension"/.test(
        text.replace(/import type [^;]+;/g, ""),
      );
      if (touchesVscode) {
        assert.ok(
          ["vscodeApi.ts", "extension.ts", "vscodeViews.ts"].includes(name),
          `${name} imports vscode`,
        );
      }
    }
  });

  it("ships a licence, an icon, a changelog and the repository, and bundles the server's wheel", () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(EXTENSION_ROOT, "package.json"), "utf8"));
    assert.equal(pkg.license, "MIT");
    assert.ok(fs.existsSync(path.join(EXTENSION_ROOT, pkg.icon)), pkg.icon);
    assert.match(pkg.repository.url, /^https:\/\//);
    for (const file of ["LICENSE", "CHANGELOG.md"]) {
      assert.ok(fs.existsSync(path.join(EXTENSION_ROOT, file)), file);
    }
    assert.match(pkg.scripts.package, /^npm run bundle-wheel && /);
    const ignore = fs.readFileSync(path.join(EXTENSION_ROOT, ".vscodeignore"), "utf8");
    for (const kept of ["!LICENSE", "!CHANGELOG.md", "!images/icon.png", "!out/bundled/*.whl"]) {
      assert.ok(ignore.split("\n").includes(kept), kept);
    }
  });

  it("puts the jobs view's cancel inline on each job", () => {
    const menus = (
      manifest.contributes as { menus?: Record<string, { command: string; when?: string; group?: string }[]> }
    ).menus!;
    const inline = menus["view/item/context"].find((m) => m.command === "stitch.cancelJob");
    assert.equal(inline?.group, "inline");
    assert.match(inline?.when ?? "", /view == stitch.jobs/);
    const views = (manifest.contributes as { views?: Record<string, { id: string }[]> }).views!;
    assert.ok(
      Object.values(views)
        .flat()
        .some((v) => v.id === "stitch.jobs"),
    );
  });
});
