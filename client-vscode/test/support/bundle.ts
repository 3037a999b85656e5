/** Loads the bundled extension (out/extension.js) with `vscode` resolved to a fake. */

import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import Module from "node:module";
import * as path from "node:path";
import { EXTENSION_ROOT, loadManifest } from "./fakes";
import type { FakeVscode } from "./fakeVscode";

/** The bundle under test: out/extension.js, or $STITCH_BUNDLE (e.g. the one taken out of a .vsix). */
const BUNDLE = path.resolve(process.env.STITCH_BUNDLE ?? path.join(EXTENSION_ROOT, "out", "extension.js"));

type Extension = { activate(ctx: unknown): Promise<void>; deactivate(): Promise<void> };
type Loader = { _load: (request: string, ...rest: unknown[]) => unknown };

/** Loads a fresh copy of the bundle with `vscode` resolved to the fake. */
export function loadBundle(fake: FakeVscode): { extension: Extension; restore(): void } {
  assert.ok(fs.existsSync(BUNDLE), `${BUNDLE} is missing: run npm run build`);
  const loader = Module as unknown as Loader;
  const original = loader._load;
  loader._load = function (request: string, ...rest: unknown[]) {
    return request === "vscode" ? fake.module : original.call(this, request, ...rest);
  };
  delete require.cache[BUNDLE];
  const extension = require(BUNDLE) as Extension;
  return {
    extension,
    restore: () => {
      loader._load = original;
    },
  };
}

export function context() {
  return {
    subscriptions: [] as { dispose(): unknown }[],
    extensionPath: EXTENSION_ROOT,
    globalStorageUri: { fsPath: fs.mkdtempSync(path.join(os.tmpdir(), "stitch-storage-")) },
    extension: { packageJSON: loadManifest() },
  };
}

export async function until(what: string, ready: () => boolean, fake: FakeVscode, timeoutMs = 20_000) {
  const deadline = Date.now() + timeoutMs;
  while (!ready()) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}; output:\n${fake.output.join("\n")}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}
