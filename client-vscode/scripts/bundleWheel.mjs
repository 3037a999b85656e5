// Builds the server's wheel into out/bundled/, which the .vsix carries: the extension installs the
// server from it when the chosen Python lacks it (nothing is fetched from a package index).
// The project is `..` (or $STITCH_PROJECT_DIR); the Python is $STITCH_PYTHON, else ../.venv, else python3.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import * as path from "node:path";

const project = path.resolve(process.env.STITCH_PROJECT_DIR ?? "..");
if (!existsSync(path.join(project, "pyproject.toml"))) {
  console.error(
    `bundle-wheel: no pyproject.toml in ${project}; set STITCH_PROJECT_DIR to the stitch-lsp checkout`,
  );
  process.exit(1);
}
const venv = path.join(project, ".venv", process.platform === "win32" ? "Scripts/python.exe" : "bin/python");
const python = process.env.STITCH_PYTHON ?? (existsSync(venv) ? venv : "python3");
const out = path.resolve("out", "bundled");
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
execFileSync(python, ["-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", out, project], {
  stdio: "inherit",
});
const wheels = readdirSync(out).filter((f) => /^stitch_lsp-.*\.whl$/.test(f));
if (wheels.length !== 1) {
  console.error(
    `bundle-wheel: expected one stitch_lsp wheel in ${out}, found ${wheels.join(", ") || "none"}`,
  );
  process.exit(1);
}
console.log(`bundle-wheel: ${path.join(out, wheels[0])}`);
