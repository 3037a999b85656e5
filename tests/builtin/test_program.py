"""CPU: the host side of whole-forward programs (buffer plan, graph runner state machine with a
fake CUDA backend) and the generated programs' shape: stages, arena, graph replay switch."""

from __future__ import annotations

import copy
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from stitch_lsp.compiler.memplan import ALIGN, Buffer, plan
from stitch_lsp.runtime.graph import ENV_SWITCH, GraphRunner, graph_pays

# ---------------------------------------------------------------------------- buffer plan


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def test_plan_reuses_memory_of_dead_buffers() -> None:
    # A chain: each stage reads the previous buffer and writes the next one.
    bufs = [Buffer(f"b{i}", 1000, i, i + 1) for i in range(6)]
    p = plan(bufs)
    assert p.total == 2 * ALIGN * 4  # two 1000-byte buffers (1024 after alignment) alive at once
    assert p.naive == 6 * 1024
    assert "6 intermediate buffers" in p.describe()


def test_plan_never_overlaps_buffers_alive_together() -> None:
    import random

    rng = random.Random(7)
    for _ in range(50):
        bufs = []
        for i in range(rng.randint(1, 12)):
            first = rng.randint(0, 10)
            bufs.append(Buffer(f"b{i}", rng.randint(1, 5000), first, first + rng.randint(0, 4)))
        p = plan(bufs)
        spans = {b.key: (p.offsets[b.key], p.offsets[b.key] + b.nbytes) for b in bufs}
        for a in bufs:
            assert p.offsets[a.key] % ALIGN == 0
            assert spans[a.key][1] <= p.total
            for b in bufs:
                if a.key < b.key and a.alive_with(b):
                    assert not _overlap(spans[a.key], spans[b.key]), (a, b, p.offsets)
        assert p.total <= p.naive


def test_plan_of_nothing() -> None:
    p = plan([])
    assert p.total == 0 and p.describe() == "no intermediate buffers"


# ---------------------------------------------------------------------------- graph runner


class FakeTensor:
    def __init__(self, values: list[float], device: str = "cuda:0") -> None:
        self.values = list(values)
        self.device = device


class FakeBackend:
    """Capture records the body; replay re-runs it into the captured output objects, which is
    what a real replay does (same memory, new contents)."""

    def __init__(self) -> None:
        self.capturing_now = False
        self.fail_capture = False
        self.replays = 0
        self.copies = 0

    def is_tensor(self, v: Any) -> bool:
        return isinstance(v, FakeTensor)

    def on_gpu(self, v: FakeTensor) -> bool:
        return v.device.startswith("cuda")

    def capturing(self) -> bool:
        return self.capturing_now

    def signature(self, v: FakeTensor) -> Any:
        return (len(v.values), v.device)

    def static_copy(self, v: FakeTensor) -> FakeTensor:
        return FakeTensor(v.values, v.device)

    def copy_into(self, static: FakeTensor, v: FakeTensor) -> None:
        self.copies += 1
        static.values[:] = v.values

    def capture(self, fn: Any, args: list[Any]) -> tuple[Any, Any]:
        if self.fail_capture:
            raise RuntimeError("operation not permitted when stream is capturing")
        out = fn(*args)
        return {"fn": fn, "args": args, "out": out}, out

    def replay(self, graph: dict[str, Any]) -> None:
        self.replays += 1
        new = graph["fn"](*graph["args"])
        pairs = (
            zip(graph["out"], new, strict=False)
            if isinstance(new, tuple)
            else [(graph["out"], new)]
        )
        for static, value in pairs:
            static.values[:] = value.values

    def fresh(self, v: FakeTensor) -> FakeTensor:
        return FakeTensor(v.values, v.device)


class Body:
    """A forward with a side effect, like training-mode batch norm's running statistics."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: FakeTensor) -> FakeTensor:
        self.calls += 1
        return FakeTensor([2 * v for v in x.values], x.device)


def _runner() -> tuple[GraphRunner, Body, FakeBackend]:
    body, be = Body(), FakeBackend()
    return GraphRunner(body, backend=be), body, be


def test_runner_warms_up_then_captures_then_replays() -> None:
    runner, _body, be = _runner()
    a = runner(FakeTensor([1, 2]))
    assert runner.mode == "warmup" and a.values == [2, 4] and be.replays == 0
    b = runner(FakeTensor([3, 4]))
    assert runner.mode == "capture" and b.values == [6, 8] and runner.captures == 1
    c = runner(FakeTensor([5, 6]))
    assert runner.mode == "replay" and c.values == [10, 12]
    # Every call's work ran exactly once: warm-up, then one replay per later call (the capture
    # itself runs nothing on a real GPU; the fake's capture call stands for the recording).
    assert be.replays == 2
    # Fresh storage every call: earlier results are untouched by later replays.
    assert a.values == [2, 4] and b.values == [6, 8]
    assert len({id(a), id(b), id(c)}) == 3
    assert runner.reason == ""


def test_runner_recaptures_for_a_new_signature_and_guard() -> None:
    state = {"ptr": 1}
    body, be = Body(), FakeBackend()
    runner = GraphRunner(body, backend=be, guard=lambda: state["ptr"])
    for _ in range(3):
        runner(FakeTensor([1, 2]))
    assert runner.captures == 1
    runner(FakeTensor([1, 2, 3]))  # new shape: warm-up again
    assert runner.mode == "warmup"
    runner(FakeTensor([1, 2, 3]))
    assert runner.captures == 2
    state["ptr"] = 2  # the parameters moved: the old graph would read freed memory
    runner(FakeTensor([1, 2]))
    assert runner.mode == "warmup"
    assert runner(FakeTensor([1, 2])).values == [2, 4] and runner.captures == 3


def test_runner_plain_launches_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    runner, _body, be = _runner()
    out = runner(FakeTensor([1.0], device="cpu"))
    assert runner.mode == "plain" and "CPU" in runner.reason and out.values == [2.0]
    be.capturing_now = True
    runner(FakeTensor([1.0]))
    assert runner.mode == "plain" and "capturing" in runner.reason
    be.capturing_now = False
    monkeypatch.setenv(ENV_SWITCH, "0")
    for _ in range(3):
        runner(FakeTensor([1.0]))
    assert runner.mode == "plain" and ENV_SWITCH in runner.reason and runner.captures == 0
    monkeypatch.setenv(ENV_SWITCH, "1")
    runner(FakeTensor([1.0]))
    runner(FakeTensor([1.0]))
    assert runner.mode == "capture"


def test_runner_falls_back_when_capture_fails() -> None:
    runner, _body, be = _runner()
    be.fail_capture = True
    runner(FakeTensor([1.0]))
    out = runner(FakeTensor([3.0]))
    assert runner.mode == "plain" and "capture failed" in runner.reason
    assert out.values == [6.0]
    runner(FakeTensor([4.0]))
    assert runner.mode == "plain" and runner.captures == 0  # not retried for this signature


def test_runner_told_the_program_syncs_never_captures() -> None:
    """A program with a data-dependent PyTorch call (it syncs with the host) runs plainly from
    the first call, and says why; no capture is attempted."""
    body, be = Body(), FakeBackend()
    runner = GraphRunner(body, backend=be, plain="self.moe (MoE) depends on data")
    for v in (1.0, 2.0, 3.0):
        assert runner(FakeTensor([v])).values == [2 * v]
    assert runner.mode == "plain" and runner.captures == 0 and be.replays == 0
    assert runner.reason == "plain launches: self.moe (MoE) depends on data"


class SizedBackend(FakeBackend):
    """Each fake element stands for `scale` bytes, so sizes can be realistic."""

    def __init__(self, scale: int) -> None:
        super().__init__()
        self.scale = scale

    def nbytes(self, v: FakeTensor) -> int:
        return len(v.values) * self.scale


def test_runner_keeps_plain_launches_when_copies_cost_more_than_launches() -> None:
    """A level-1 ReLU over 6.4 GB: one launch; replay would copy 12.9 GB per call."""
    be = SizedBackend(scale=3_200_000_000)
    runner = GraphRunner(Body(), backend=be, stages=1)
    runner(FakeTensor([1.0, 2.0]))
    assert runner.mode == "warmup"
    for _ in range(3):
        out = runner(FakeTensor([1.0, 2.0]))
        assert runner.mode == "plain" and out.values == [2.0, 4.0]
    assert runner.captures == 0 and be.copies == 0
    assert "12800.0 MB" in runner.reason and "1 stage " in runner.reason, runner.reason


def test_force_replays_where_the_rule_would_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_SWITCH, "force")
    be = SizedBackend(scale=3_200_000_000)
    runner = GraphRunner(Body(), backend=be, stages=1)
    for _ in range(3):
        runner(FakeTensor([1.0, 2.0]))
    assert runner.mode == "replay" and runner.captures == 1


def test_runner_replays_when_launches_cost_more_than_copies() -> None:
    """ResNet-18 at batch 2: 43 stages, 1.2 MB in and 8 KB out."""
    be = SizedBackend(scale=600_000)
    runner = GraphRunner(Body(), backend=be, stages=43)
    for _ in range(3):
        runner(FakeTensor([1.0, 2.0]))
    assert runner.mode == "replay" and runner.captures == 1 and runner.reason == ""


class TimedBackend(SizedBackend):
    """Calls take what `costs` says: replay (the copies and the graph) and plain launches."""

    def __init__(self, replay_s: float, plain_s: float) -> None:
        super().__init__(scale=600_000)
        self.costs = {"replay": replay_s, "plain": plain_s}
        self.timed: list[str] = []

    def seconds(self, fn: Any) -> float:
        replays = self.replays
        fn()
        way = "replay" if self.replays > replays else "plain"
        self.timed.append(way)
        return self.costs[way]


@pytest.mark.parametrize(
    ("replay_s", "plain_s", "kept"), [(2e-4, 1e-4, "plain"), (1e-4, 2e-4, "replay")]
)
def test_a_forward_without_state_keeps_the_way_it_timed_faster(
    replay_s: float, plain_s: float, kept: str
) -> None:
    """Where the cost rule picks replay, a forward that changes no state is timed both ways
    on its capture call (held-out 44 on an H100: 0.152 ms replayed, 0.099 ms plain)."""
    be = TimedBackend(replay_s, plain_s)
    body = Body()
    runner = GraphRunner(body, backend=be, stages=43, timed=True)
    runner(FakeTensor([1.0, 2.0]))
    out = runner(FakeTensor([3.0, 4.0]))
    assert runner.mode == "capture" and out.values == [6.0, 8.0]  # the call's own result
    assert be.timed == ["replay", "plain"] * 3
    later = runner(FakeTensor([5.0, 6.0]))
    assert later.values == [10.0, 12.0] and runner.mode == kept
    if kept == "plain":
        assert "timed faster" in runner.reason and "100 us a call against 200 us" in runner.reason
    else:
        assert runner.reason == "" and runner.captures == 1


def test_a_forward_with_state_is_never_run_twice() -> None:
    """Running statistics or a cache write would be applied again: no timing, the rule stands."""
    be = TimedBackend(2e-4, 1e-4)
    body = Body()
    runner = GraphRunner(body, backend=be, stages=43)
    for v in (1.0, 2.0, 3.0):
        runner(FakeTensor([v]))
    # warm-up, the fake's capture (standing for the recording), and one replay per later call
    assert be.timed == [] and runner.mode == "replay" and body.calls == 4


def test_graph_pays_rule() -> None:
    """The H200 measurements the constants come from: ResNet's basic block (6 stages, 134 MB
    copied) ran faster under replay; a level-2 convolution (2 stages, 788 MB) slower."""
    assert graph_pays(6, 134_500_000)[0]
    assert graph_pays(43, 1_200_000)[0]
    assert not graph_pays(1, 10)[0]  # one stage: nothing to save
    pays, why = graph_pays(2, 788_600_000)
    assert not pays and "788.6 MB" in why and "2 stages" in why


def test_runner_maps_tuples_and_copies_inputs() -> None:
    be = FakeBackend()
    runner = GraphRunner(lambda x, k: (x, FakeTensor([v + k for v in x.values])), backend=be)
    for i in range(3):
        x = FakeTensor([float(i)])
        got = runner(x, 1)
        assert isinstance(got, tuple) and got[1].values == [i + 1.0]
        assert got[0].values == [float(i)]
        if i:  # replayed: a returned input is a fresh copy too, never the static buffer
            assert (
                got[0] is not x and got[0] is not runner._entries[runner.key((x, 1))]["static"][0]
            )
    assert be.copies >= 2


def test_runner_deepcopy_starts_over() -> None:
    runner, _body, _be = _runner()
    for _ in range(3):
        runner(FakeTensor([1.0]))
    twin = copy.deepcopy(runner)
    assert twin.captures == 0 and twin._entries == {}


# ---------------------------------------------------------------------------- generated programs


def _generate(path: Path) -> Any:
    from tests.builtin.helpers import generate_for

    cand = generate_for(path)
    assert cand.handled, cand.reason
    return cand


def test_level3_program_has_stages_arena_and_graph(kernelbench_dir: Path) -> None:
    pytest.importorskip("torch")
    cand = _generate(kernelbench_dir / "level3" / "9_ResNet18.py")
    src = cand.source
    assert "from stitch_lsp.runtime.graph import Arena, GraphRunner" in src
    assert "Execution: one program" in src and "STITCH_CUDA_GRAPH=0" in src
    # The runner is told the stage count, for its rule on when replay pays for its copies; not
    # `timed`: in training mode the batch norms update running statistics, which a second run
    # of the forward would update again.
    assert f"GraphRunner(self._launch, guard=self._stitch_guard, stages={len(cand.groups)})" in src
    assert "_ARENA_LAYOUT = [" in src and "buf = _arena(self).views(dev)" in src
    # Every group is a numbered stage, in the docstring, in forward, and in the model.
    stages = [g.stage for g in cand.groups]
    assert stages == list(range(len(cand.groups)))
    for g in cand.groups:
        assert f"# stage {g.stage}: " in src
    assert {"conv", "reduction"} <= {g.kind for g in cand.groups}
    # The arena is smaller than one buffer per intermediate.
    import re

    m = re.search(r"Memory: (\d+) intermediate buffers in one ([\d.]+) MiB arena \(([\d.]+)", src)
    assert m is not None and float(m.group(2)) < float(m.group(3))
    # No per-call allocation of intermediates: torch.empty is only for results of forward.
    forward = src[src.index("def _launch(") :]
    assert forward.count("torch.empty(") == 1
    compile(src, "resnet18_builtin.py", "exec")


BN_PROBLEM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 13, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(13)
        self.conv2 = nn.Conv2d(13, 13, 1)
        self.bn2 = nn.BatchNorm2d(13, momentum=0.3)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.bn2(self.conv2(y)) * 0.5


def get_inputs():
    return [torch.randn(5, 3, 17, 19)]


def get_init_inputs():
    return []
"""


def _bn_cumulative_cuda(tmp_path: Path) -> str:
    """BN_PROBLEM with the second norm's momentum=None (cumulative average). Shape propagation on
    the meta device cannot run such a module (it reads the batch count), so the IR is patched."""
    from stitch_lsp.compiler.codegen import Codegen
    from stitch_lsp.compiler.partition import partition
    from stitch_lsp.compiler.worker.capture import capture
    from tests.builtin.helpers import write_problem

    graph = capture(write_problem(tmp_path, "bn_cumulative", BN_PROBLEM))
    sinks = [n for n in graph.nodes if n.kind == "bn_update"]
    assert [s.params["momentum"] for s in sinks] == [0.1, 0.3]
    sinks[1].params["momentum"] = None
    return Codegen(graph, partition(graph)).cuda_source()


def test_cumulative_batch_norm_counts_after_the_update(tmp_path: Path) -> None:
    """momentum=None: the factor reads the old count, a later launch bumps it (no race)."""
    pytest.importorskip("torch")
    cuda = _bn_cumulative_cuda(tmp_path)
    assert cuda.count("stitch_count_batch<<<1, 1, 0, stream>>>") == 1
    assert cuda.count("(1.f / (float)(") == 1
    assert cuda.count("[0] += 1;") == 2  # the momentum norm in its kernel, plus the bump kernel


LEVEL3_COMPILE = ["35_LSTM", "39_GRU", "8_ResNetBasicBlock", "3_DeepNarrowMLP"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_level3_programs_compile_for_sm90a(kernelbench_dir: Path, tmp_path: Path) -> None:
    from stitch_lsp.runtime import build_cuda
    from tests.builtin.cuda_headers import cublas_include

    include = cublas_include()
    if include is None:
        pytest.skip("no cuBLAS headers (CUDA toolkit or the nvidia-cublas wheel)")
    sources = {"bn_cumulative": _bn_cumulative_cuda(tmp_path)}
    for stem in LEVEL3_COMPILE:
        sources[stem] = _generate(kernelbench_dir / "level3" / f"{stem}.py").cuda_source

    def build(stem: str) -> None:
        name = "l3_" + "".join(c if c.isalnum() else "_" for c in stem)
        flags = [f"-I{include}"] if include else []
        build_cuda(sources[stem] or "", name=name, extra_flags=flags, libraries=(), arch="sm_90a")

    with ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(build, sources))


def test_a_one_launch_program_says_it_runs_plainly(kernelbench_dir: Path) -> None:
    pytest.importorskip("torch")
    src = _generate(kernelbench_dir / "level1" / "19_ReLU.py").source
    assert "Execution: one launch on the current stream. It runs plainly" in src
    assert "stages=1, timed=True)" in src  # it changes no state: it may be timed both ways


# ---------------------------------------------------------------------------- arena clashes

_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "int64": 8, "uint8": 1, "bool": 1}


def arena_clashes(source: str) -> list[str]:
    """Launches in a generated program whose output buffer shares arena bytes with one of the
    buffers it reads. A kernel may read its operands at other positions than it writes (a cat
    of strided slices), so no such sharing is ever safe."""
    import math
    import re

    layout = re.search(r"_ARENA_LAYOUT = \[(.*?)\n\]", source, re.S)
    if layout is None:
        return []
    spans = []
    for off, shape, dtype in re.findall(r"\((\d+), \(([\d, ]*)\), torch\.(\w+)\)", layout[1]):
        dims = [int(d) for d in shape.replace(" ", "").split(",") if d]
        spans.append((int(off), int(off) + math.prod(dims) * _BYTES[dtype]))
    where: dict[str, tuple[int, int]] = {}
    written: set[str] = set()
    clashes = []
    for line in source.splitlines():
        line = line.strip()
        if line.startswith("# stage "):
            written = set()
        elif m := re.fullmatch(r"(t\d+) = buf\[(\d+)\]", line):
            where[m[1]] = spans[int(m[2])]
            written.add(m[1])
        elif line.startswith("_check(lib."):
            args = re.findall(r"\b(t\d+)\.data_ptr\(\)", line)
            outs = [a for a in args if a in written]
            ins = [a for a in args if a in where and a not in written]
            for o in outs:
                for i in ins:
                    (a0, a1), (b0, b1) = where[o], where[i]
                    if a0 < b1 and b0 < a1:
                        clashes.append(f"{line[11:60]}: writes {o} over {i}")
    return clashes


# Swin's patch merging: a residual add that only a cat of stride-2 slices reads is computed in
# the cat's kernel, so the add's operands are read in that kernel, at positions other than
# the ones it writes.
PATCH_MERGE = """
import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc0 = nn.Linear(16, 16)
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(64, 32)

    def forward(self, x):
        h0 = torch.tanh(self.fc0(x))
        h = h0 + self.fc1(h0)
        m = torch.cat([h[:, 0::2, 0::2], h[:, 1::2, 0::2], h[:, 0::2, 1::2], h[:, 1::2, 1::2]], -1)
        return self.fc2(F.layer_norm(m, (64,)))


def get_inputs():
    return [torch.randn(2, 8, 8, 16)]


def get_init_inputs():
    return []
"""


def test_no_launch_writes_over_what_it_reads(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    path = tmp_path / "patch_merge.py"
    path.write_text(PATCH_MERGE)
    cand = _generate(path)
    assert cand.handled, cand.reason
    assert "cat" in cand.source and "_ARENA_LAYOUT" in cand.source
    assert arena_clashes(cand.source) == []


def test_the_clash_check_sees_a_clash() -> None:
    source = (
        "_ARENA_LAYOUT = [\n    (0, (4, 4), torch.float32),\n    (32, (4, 4), torch.float32),\n]\n"
        "        # stage 1: x\n        t1 = buf[0]\n        _check(lib.k1(t0.data_ptr(), "
        "t1.data_ptr(), stream), lib, 'k1')\n        # stage 2: y\n        t2 = buf[1]\n"
        "        _check(lib.k2(t1.data_ptr(), t2.data_ptr(), stream), lib, 'k2')\n"
    )
    assert len(arena_clashes(source)) == 1


# Swin's shifted-window block after attention: the projection (+ tanh here, so that an
# elementwise value stays in the kernel) is read through the window-reverse permute by the roll's
# cat. The cat's kernel computes that value itself, and must compute it at the element the
# permute maps to, not at the cat's own index.
WINDOW_ROLL = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        y = torch.tanh(self.proj(x))  # (batch * windows, 4, 8): 2x2 windows of a 4x4 map
        y = y.view(2, 2, 2, 2, 2, 8).permute(0, 1, 3, 2, 4, 5).reshape(2, 4, 4, 8)
        return torch.roll(y, shifts=(1, 1), dims=(1, 2))


def get_inputs():
    return [torch.randn(8, 4, 8)]


def get_init_inputs():
    return []
"""


def test_a_cat_reads_its_kernels_values_through_their_view(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    import re

    from stitch_lsp.compiler.worker.capture import capture

    from .helpers import import_path
    from .interp import run_graph

    torch = pytest.importorskip("torch")
    path = tmp_path / "window_roll.py"
    path.write_text(WINDOW_ROLL)
    graph = capture(path)
    mod = import_path(path, "window_roll")
    model = mod.Model()
    (x,) = mod.get_inputs()
    with torch.no_grad():
        torch.testing.assert_close(run_graph(graph, model, [x])[0], model(x))
    cand = _generate(path)
    assert cand.handled, cand.reason
    src = cand.cuda_source or ""
    cat = re.search(
        r"__global__ void __launch_bounds__\(256\) (\w*cat\w*)_kernel\(.*?\n}\n", src, re.S
    )
    assert cat is not None, src[:2000]
    # The tanh is computed in the cat's kernel, each time from the projection's element at the
    # position the permute maps to: (window row, row in window, window column) strides 64, 16, 32
    # into the (8, 4, 8) projection, not the cat's own contiguous positions.
    assert "st_tanh(" in cat[0]
    reads = re.findall(r"__ldg\(in0 \+ (\w+)\)", cat[0])
    assert reads, cat[0]
    for name in set(reads):
        (expr,) = re.findall(rf"const idx_t {name} = (.*);", cat[0])
        assert "* 16" in expr and "* 32" in expr, expr


MASKED_CUMSUM = """
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x, mask):
        return torch.cumsum(x * mask, dim=1)


def get_inputs():
    x = torch.rand(4, 1000)
    return [x, torch.randint(0, 2, x.shape).bool()]


def get_init_inputs():
    return []
"""


def test_a_bool_input_is_read_as_bool_and_other_types_are_refused(tmp_path: Path) -> None:
    """Level 1's 93_masked_cumsum takes a bool mask: its kernels read it as bool (they agree with
    the graph in host emulation, test_host_kernels), and a forward given another type for an
    input is refused by name before any kernel runs, as another shape is."""
    torch = pytest.importorskip("torch")
    from .helpers import generate_for, import_path, write_problem

    path = write_problem(tmp_path, "masked_cumsum", MASKED_CUMSUM)
    cand = generate_for(path)
    assert "const bool* __restrict__ in1" in cand.source
    out = tmp_path / "masked_cumsum_stitch.py"
    out.write_text(cand.source)
    mod = import_path(out, "masked_cumsum_stitch")
    mod._load = lambda: None  # the checks run first; no kernel is built or launched
    model = mod.ModelNew()
    x = torch.rand(4, 1000)
    with pytest.raises(TypeError, match=r"mask has dtype torch.float32; .* torch.bool"):
        model(x, (x > 0.5).float())
    with pytest.raises(TypeError, match=r"x has dtype torch.float64; .* torch.float32"):
        model(x.double(), x > 0.5)
    with pytest.raises(ValueError, match=r"mask has shape \(4, 999\)"):
        model(x, torch.ones(4, 999, dtype=torch.bool))
