"""Fakes for the loop's collaborators: a scripted Verifier, a canned analysis, candidate files."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

from stitch_lsp.agents.hardware import spec_for
from stitch_lsp.models.agents import OpCost, ReferenceAnalysis, TensorMeta, Verdict
from stitch_lsp.models.findings import Finding, Severity

REFERENCE = """import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, n: int):
        super().__init__()
        self.n = n

    def forward(self, x):
        return torch.relu(x) * 2.0


def get_inputs():
    return [torch.randn(16, 1024)]


def get_init_inputs():
    return [1024]
"""

_VERDICT = re.compile(r"# VERDICT (\w+)(?: ([\d.]+))?(?: LINE (\d+))?(?: MSG (.*))?")


def candidate(verdict: str, *, kernels: int = 1, extra: str = "") -> str:
    """A candidate file whose marker comment tells FakeVerifier what to answer."""
    body = "\n".join(
        f"__global__ void k{i}(const float* __restrict__ x, float* y, int n) {{ }}"
        for i in range(kernels)
    )
    return (
        f"import torch\nfrom torch.utils.cpp_extension import load_inline\n# {verdict}\n"
        f'cuda_src = r"""\n{body}\n"""\n{extra}\n'
        "class ModelNew(torch.nn.Module):\n"
        "    def __init__(self, n):\n        super().__init__()\n\n"
        "    def forward(self, x):\n        return x\n"
    )


def reply(verdict: str, **kw: object) -> str:
    return f"Here is the file.\n\n```python\n{candidate(verdict, **kw)}```\n"


class FakeVerifier:
    """Answers from the `# VERDICT status [speedup] [LINE n] [MSG text]` marker in the code."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.profiled: list[str] = []

    def profile(
        self, reference: Path, candidate: str, *, cancel: threading.Event
    ) -> tuple[str | None, list[str]]:
        self.profiled.append(candidate)
        return "k0 5.0 us, memory-bound", ["k0: UncoalescedGlobalAccess (est. 40%): stride 32"]

    def __call__(
        self, reference: Path, candidate: str, *, compile_only: bool, cancel: threading.Event
    ) -> Verdict:
        self.calls.append((candidate, compile_only))
        found = list(_VERDICT.finditer(candidate))
        assert found, "candidate without a VERDICT marker"
        m = found[-1]  # the last one: code spliced into a program carries its own
        status, speed, line, msg = m.groups()
        if status == "compile_error":
            d = Finding(
                path="candidate.py",
                line=int(line or 1),
                severity=Severity.error,
                code="nvcc",
                message=msg or "expected a ';'",
            )
            return Verdict(status="compile_error", message="build failed", diagnostics=[d])
        if status == "incorrect":
            return Verdict(
                status="incorrect",
                message="outputs differ",
                correctness=msg or "max abs error 0.5 at index [0, 3]",
            )
        if status == "passed" and compile_only:
            return Verdict(status="compiled", message="built")
        if status == "passed":
            s = float(speed or 1.0)
            return Verdict(status="passed", speedup=s, eager_ms=1.0, candidate_ms=1.0 / s)
        return Verdict(status=status)  # type: ignore[arg-type]


def fake_analysis(reference: Path, settings: object, **_: object) -> ReferenceAnalysis:
    hw = spec_for("NVIDIA H200")
    return ReferenceAnalysis(
        graph_method="fx",
        inputs=[TensorMeta(shape=[16, 1024], dtype="float32")],
        outputs=[TensorMeta(shape=[16, 1024], dtype="float32")],
        ops=[
            OpCost(
                node="relu",
                op="relu",
                kind="call_function",
                flops=16384,
                bytes=131072,
                floor_ms=3e-5,
            ),
            OpCost(
                node="mul", op="mul", kind="call_function", flops=16384, bytes=131072, floor_ms=3e-5
            ),
        ],
        total_flops=32768,
        fused_bytes=131072,
        fused_floor_ms=3e-5,
        unfused_floor_ms=6e-5,
        hardware=hw,
    )


# ---------------------------------------------------------------- a model of three fusion groups

MLP3 = (Path(__file__).resolve().parent / "data" / "mlp3.py").read_text(encoding="utf-8")

_MLP3_OPS = [  # (node, op, shape, flops, statement) in forward order, as the planner worker sees
    ("fc1", "Linear", [256, 1024], 2.7e8, "fc1 = self.fc1(x)"),
    ("relu", "relu", [256, 1024], 2.6e5, "relu = torch.relu(fc1)"),
    ("fc2", "Linear", [256, 1024], 5.4e8, "fc2 = self.fc2(relu)"),
    ("tanh", "tanh", [256, 1024], 2.6e5, "tanh = torch.tanh(fc2)"),
    ("mul", "mul", [256, 1024], 2.6e5, "mul = tanh * 0.5"),
    ("fc3", "Linear", [256, 256], 1.3e8, "fc3 = self.fc3(mul)"),
    ("sigmoid", "sigmoid", [256, 256], 6.6e4, "sigmoid = torch.sigmoid(fc3)"),
]


_MLP3_LINES = {"fc1": 16, "relu": 16, "fc2": 17, "tanh": 17, "mul": 17, "fc3": 18, "sigmoid": 18}


def mlp3_analysis(reference: Path, settings: object, **_: object) -> ReferenceAnalysis:
    """What the planner worker reports for data/mlp3.py (three groups), with its scaffold."""
    from stitch_lsp.models.agents import ForwardScaffold, ScaffoldInput, ScaffoldStatement

    hw = spec_for("NVIDIA H200")
    ops = []
    statements = []
    previous = "x"
    for node, op, shape, flops, code in _MLP3_OPS:
        meta = TensorMeta(shape=shape, dtype="float32")
        ops.append(
            OpCost(
                node=node,
                op=op,
                kind="call_module" if op == "Linear" else "call_function",
                outputs=[meta],
                flops=flops,
                bytes=4.0 * shape[0] * shape[1] * 3,
                floor_ms=flops / 60e12 * 1e3,
                bound="compute" if op == "Linear" else "memory",
                line=_MLP3_LINES[node],
            )
        )
        statements.append(
            ScaffoldStatement(node=node, code=code, args=[previous], line=ops[-1].line, meta=meta)
        )
        previous = node
    prelude = (
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(torch.nn.Module):\n"
        "    def __init__(self, d_in: int, d_hidden: int, d_out: int):\n"
        "        super().__init__()\n"
        "        self.fc1 = nn.Linear(d_in, d_hidden)\n"
        "        self.fc2 = nn.Linear(d_hidden, d_hidden)\n"
        "        self.fc3 = nn.Linear(d_hidden, d_out)\n"
    )
    scaffold = ForwardScaffold(
        prelude=prelude,
        signature="def forward(self, x: torch.Tensor) -> torch.Tensor:",
        inputs=[ScaffoldInput(name="x", meta=TensorMeta(shape=[256, 512], dtype="float32"))],
        statements=statements,
        returns="return sigmoid",
        output_args=["sigmoid"],
    )
    return ReferenceAnalysis(
        graph_method="fx",
        inputs=[TensorMeta(shape=[256, 512], dtype="float32")],
        outputs=[TensorMeta(shape=[256, 256], dtype="float32")],
        ops=ops,
        total_flops=sum(o.flops for o in ops),
        hardware=hw,
        scaffold=scaffold,
    )


def step_program(verdict: str, *, custom: tuple[str, ...] = (), extra: str = "") -> str:
    """A partial program for mlp3 with the `custom` groups' blocks calling a kernel, the others
    PyTorch, and a VERDICT marker for FakeVerifier."""
    blocks = {
        "k1": (["fc1 = self.fc1(x)", "relu = torch.relu(fc1)"], "relu = _run(x)"),
        "k2": (
            ["fc2 = self.fc2(relu)", "tanh = torch.tanh(fc2)", "mul = tanh * 0.5"],
            "mul = _run(relu)",
        ),
        "k3": (["fc3 = self.fc3(mul)", "sigmoid = torch.sigmoid(fc3)"], "sigmoid = _run(mul)"),
    }
    lines = [
        f"# {verdict}",
        "import torch",
        "import torch.nn as nn",
        'cuda_src = r"""',
        *(f"__global__ void {g}(const float* x, float* y, int n) {{ }}" for g in custom),
        '"""',
        extra,
        "",
        "class ModelNew(torch.nn.Module):",
        "    def __init__(self, d_in, d_hidden, d_out):",
        "        super().__init__()",
        "",
        "    def forward(self, x):",
    ]
    for name, (torch_lines, cuda_line) in blocks.items():
        lines.append(f"        # >>> stitch {name} · a block")
        lines += [f"        {s}" for s in ([cuda_line] if name in custom else torch_lines)]
        lines.append(f"        # <<< stitch {name}")
    lines.append("        return sigmoid")
    return "\n".join(lines) + "\n"


def step_reply(verdict: str, custom: tuple[str, ...] = (), extra: str = "") -> str:
    return f"The next group.\n\n```python\n{step_program(verdict, custom=custom, extra=extra)}```\n"


def records(tmp_path: Path) -> list[dict]:  # type: ignore[type-arg]
    """The attempt records of the one trajectory file a loop wrote under tmp_path/traj."""
    files = list((tmp_path / "traj").glob("*.jsonl"))
    assert len(files) == 1
    return [json.loads(line) for line in files[0].read_text().splitlines()]
