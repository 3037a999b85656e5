from stitch_lsp.agents.extract import extract_code

FILE = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


def test_picks_the_python_block_that_defines_modelnew():
    reply = (
        "First a sketch:\n```python\ndef helper():\n    pass\n```\n"
        f"The file:\n```python\n{FILE}```\n"
        "and the CUDA alone:\n```cuda\n__global__ void k() {}\n```\n"
    )
    assert extract_code(reply).code == FILE


def test_accepts_untagged_and_tilde_fences():
    assert extract_code(f"```\n{FILE}```").code == FILE
    assert extract_code(f"~~~py\n{FILE}~~~\n").code == FILE


def test_unfenced_file_is_accepted():
    assert extract_code(FILE).code == FILE


def test_explains_what_is_missing():
    assert "empty" in extract_code("  ").problem
    assert "no code block" in extract_code("I think a kernel would do.").problem
    assert "does not define `class ModelNew`" in extract_code("```python\nx = 1\n```").problem
    assert "(cuda)" in extract_code("```cuda\n__global__ void k() {}\n```").problem
    assert "never closes" in extract_code(f"```python\n{FILE}").problem
