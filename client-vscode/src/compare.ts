/**
 * "Compare with reference": which file a generated file was made from. Its first line names it,
 * `# stitch-lsp: reference=PATH`, relative to the file (the server writes it; users may too).
 * A path that is not only plain path characters is written as a JSON string literal:
 * `# stitch-lsp: reference="my problem.py"` (stitch_lsp/candidate_header.py is the writer).
 */

import * as path from "node:path";

const HEADER = /^#[ \t]*stitch-lsp:[ \t]*reference[ \t]*=[ \t]*("(?:[^"\\]|\\.)*"|[^\s"]\S*)[ \t]*$/;
// Controls, format characters and line separators: the writer refuses them, so a reader does too.
const REFUSED = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/u;

function headerValue(raw: string): string | undefined {
  if (!raw.startsWith('"')) {
    return raw;
  }
  try {
    const value: unknown = JSON.parse(raw);
    return typeof value === "string" && value !== "" && !REFUSED.test(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** The reference's absolute path, or undefined when the text has no header. */
export function referenceOf(text: string, filePath: string): string | undefined {
  const first = text.split(/\r?\n/, 1)[0] ?? "";
  const match = HEADER.exec(first);
  if (match === null) {
    return undefined;
  }
  const named = headerValue(match[1]);
  if (named === undefined) {
    return undefined;
  }
  return path.isAbsolute(named) ? path.normalize(named) : path.resolve(path.dirname(filePath), named);
}
