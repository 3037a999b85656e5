/**
 * "Compare with reference": which file a generated file was made from. Its first line names it,
 * `# stitch-lsp: reference=PATH`, relative to the file (the server writes it; users may too).
 */

import * as path from "node:path";

const HEADER = /^#\s*stitch-lsp:\s*reference=(\S+)\s*$/;

/** The reference's absolute path, or undefined when the text has no header. */
export function referenceOf(text: string, filePath: string): string | undefined {
  const first = text.split(/\r?\n/, 1)[0] ?? "";
  const match = HEADER.exec(first);
  if (match === null) {
    return undefined;
  }
  const named = match[1];
  return path.isAbsolute(named) ? path.normalize(named) : path.resolve(path.dirname(filePath), named);
}
