import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { referenceOf } from "../../src/compare";

describe("the reference of a generated file", () => {
  it("comes from the first line's header, relative to the file", () => {
    assert.equal(
      referenceOf("# stitch-lsp: reference=layernorm_gelu.py\nimport torch\n", "/w/ex/a_stitch.py"),
      "/w/ex/layernorm_gelu.py",
    );
    assert.equal(referenceOf("#stitch-lsp: reference=../p/ref.py\r\n", "/w/ex/a.py"), "/w/p/ref.py");
    assert.equal(referenceOf("# stitch-lsp: reference=/abs/ref.py\n", "/w/ex/a.py"), "/abs/ref.py");
  });

  it("reads a quoted path, as the server writes one with a space or a quote", () => {
    assert.equal(
      referenceOf('# stitch-lsp: reference="my problem.py"\nimport torch\n', "/w/ex/a.py"),
      "/w/ex/my problem.py",
    );
    assert.equal(referenceOf('# stitch-lsp: reference="q\\"uote.py"\n', "/w/a.py"), '/w/q"uote.py');
    assert.equal(referenceOf('# stitch-lsp: reference="a\\nb.py"\n', "/w/a.py"), undefined);
    assert.equal(referenceOf('# stitch-lsp: reference="open.py\n', "/w/a.py"), undefined);
  });

  it("is unknown without a header on the first line", () => {
    assert.equal(referenceOf("import torch\n# stitch-lsp: reference=x.py\n", "/w/a.py"), undefined);
    assert.equal(referenceOf("", "/w/a.py"), undefined);
  });
});
