// Bundles the extension and vscode-languageclient into one file, so the .vsix needs no node_modules.
import { copyFileSync, mkdirSync } from "node:fs";
import * as esbuild from "esbuild";

const production = process.argv.includes("--production");

await esbuild.build({
  entryPoints: ["src/extension.ts"],
  bundle: true,
  format: "cjs",
  platform: "node",
  target: "node18",
  outfile: "out/extension.js",
  external: ["vscode"],
  sourcemap: !production,
  minify: production,
  logLevel: "info",
});

// vscode-languageclient kills a hung server with a script it finds next to its own code.
mkdirSync("out", { recursive: true });
copyFileSync("node_modules/vscode-languageclient/lib/node/terminateProcess.sh", "out/terminateProcess.sh");
