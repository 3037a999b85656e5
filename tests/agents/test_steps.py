"""Step-by-step runs: the Planner's groups as subtasks, partial programs verified one group at a
time, the stitch step, builtin seeding, and what the records say. Scripted endpoint on 127.0.0.1
and a scripted Verifier; the analysis is the planner worker's for data/mlp3.py, canned."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from stitch_lsp.agents.coder import LLMCoder
from stitch_lsp.agents.llm import ChatClient
from stitch_lsp.agents.loop import GenerationLoop, LoopOptions
from stitch_lsp.agents.partial import GroupSeed, Subproblem
from stitch_lsp.config import Settings
from stitch_lsp.models.agents import CoderStage
from tests.agents.fake_openai import FakeOpenAI
from tests.agents.helpers import (
    MLP3,
    FakeVerifier,
    candidate,
    fake_analysis,
    mlp3_analysis,
    records,
    reply,
    step_reply,
)


@pytest.fixture
def mlp3(tmp_path: Path) -> Path:
    path = tmp_path / "mlp3.py"
    path.write_text(MLP3, encoding="utf-8")
    return path


def make_loop(
    endpoint: FakeOpenAI,
    reference: Path,
    tmp_path: Path,
    *,
    analyze=mlp3_analysis,
    cancel: threading.Event | None = None,
    progress: list[str] | None = None,
    **settings: object,
) -> tuple[GenerationLoop, FakeVerifier]:
    values = {"llm_base_url": endpoint.base_url, "llm_model": "test-model", "llm_timeout_s": 2.0}
    s = Settings.from_sources(**{**values, **settings})
    cancel = cancel or threading.Event()
    client = ChatClient(s, retries=1, backoff_s=0.01, cancel=cancel)
    verifier = FakeVerifier()
    loop = GenerationLoop(
        reference,
        s,
        LLMCoder(client),
        verifier,
        client=client,
        options=LoopOptions(use_judge=False, trajectories_dir=tmp_path / "traj"),
        analyze=analyze,
        cancel=cancel,
        progress=(progress.append if progress is not None else None),
    )
    return loop, verifier


def test_groups_are_built_one_by_one_then_stitched(endpoint, mlp3, tmp_path):
    """Three groups: subtask 2's first version does not build and is repaired inside the
    subtask; after subtask 3 the stitch step makes the program that is kept."""
    endpoint.script.coder.extend(
        [
            step_reply("VERDICT passed 0.9", custom=("k1",)),
            step_reply("VERDICT compile_error LINE 5 MSG expected a ';'", custom=("k1", "k2")),
            step_reply("VERDICT passed 1.0", custom=("k1", "k2")),
            step_reply("VERDICT passed 1.1", custom=("k1", "k2", "k3")),
            reply("VERDICT passed 2.4"),  # the stitched whole program
        ]
    )
    progress: list[str] = []
    loop, verifier = make_loop(endpoint, mlp3, tmp_path, progress=progress, target_speedup=2.0)
    result = loop.run()

    assert result.stopped == "target_met"
    a = result.attempts
    assert [x.phase for x in a] == ["subtask"] * 4 + ["stitch"]
    assert [x.stage for x in a] == [
        CoderStage.draft,
        CoderStage.draft,
        CoderStage.repair_compile,
        CoderStage.draft,
        CoderStage.optimize_performance,
    ]
    assert [(x.subtask.index, x.subtask.attempt) for x in a[:4]] == [(1, 1), (2, 1), (2, 2), (3, 1)]
    assert [x.partial for x in a] == [True, True, True, False, False]
    assert [o.status for o in result.subtasks] == ["done", "done", "done"]
    assert [o.attempts for o in result.subtasks] == [[1], [2, 3], [4]]
    # the stitched program is the one kept, not a partial step
    assert result.best_index == 5 and result.best.code == verifier.calls[-1][0]
    assert result.message.endswith("; step by step: 3 subtasks, 3 done")
    assert "Subtask 2/3: linear+tanh+mul, attempt 1/3" in progress
    assert "Subtask 2/3: linear+tanh+mul, attempt 2/3" in progress
    assert "Whole program: attempt 1/5" in progress

    prompts = endpoint.script.prompts("coder")
    first = prompts[0]
    assert "This is Subtask 1/3: linear+relu" in first
    assert "- fc1: Linear -> [256, 1024], line 16" in first
    assert "# >>> stitch k1 · subtask 1/3: linear+relu" in first  # the scaffold with its blocks
    assert "fc1 = self.fc1(x)  # line 16" in first
    assert "Later code uses: relu" in first
    second = prompts[1]
    assert "This is Subtask 2/3: linear+tanh+mul" in second
    assert "already in CUDA and verified: linear+relu" in second
    assert "VERDICT passed 0.9" in second  # the current program is subtask 1's
    repair = prompts[2]
    assert repair.startswith("The model is built step by step; this is Subtask 2/3")
    assert "(attempt 2 of 3 for this subtask)" in repair
    assert "line 5:1 error [nvcc] expected a ';'" in repair
    stitch = prompts[4]
    assert "Stitch it into one end-to-end program" in stitch
    assert "in CUDA: linear+relu, linear+tanh+mul, linear+sigmoid" in stitch
    assert "VERDICT passed 1.1" in stitch  # it starts from the program the subtasks built
    assert "Profile: k0 5.0 us" in stitch  # and from that program's profile

    recs = records(tmp_path)
    assert [r["phase"] for r in recs] == ["subtask"] * 4 + ["stitch"]
    assert recs[1]["subtask"] == {
        "index": 2,
        "total": 3,
        "group": "k2",
        "label": "linear+tanh+mul",
        "ops": ["fc2", "tanh", "mul"],
        "attempt": 1,
        "budget": 3,
    }
    assert [r["partial"] for r in recs] == [True, True, True, False, False]
    assert recs[4]["subtask"] is None and recs[4]["metadata"]["accepted"] is True
    assert all(r["schema"] == "stitch-lsp.trajectory/1" for r in recs)


def test_a_subtask_that_never_passes_leaves_its_group_in_pytorch(endpoint, mlp3, tmp_path):
    endpoint.script.coder.extend(
        [
            step_reply("VERDICT passed 0.9", custom=("k1",)),
            step_reply("VERDICT incorrect MSG max abs error 0.3", custom=("k1", "k2")),
            step_reply("VERDICT incorrect", custom=("k1", "k2")),
            step_reply("VERDICT runtime_error", custom=("k1", "k2")),
            step_reply("VERDICT passed 1.0", custom=("k1", "k3")),
            reply("VERDICT passed 1.3"),
        ]
    )
    loop, _ = make_loop(endpoint, mlp3, tmp_path, max_attempts=5, target_speedup=1.2)
    result = loop.run()

    assert [o.status for o in result.subtasks] == ["done", "failed", "done"]
    assert "no correct version in 3 attempt(s) (last: runtime_error)" in result.subtasks[1].message
    prompts = endpoint.script.prompts("coder")
    # subtask 3 is told that group 2 stayed PyTorch, and starts from subtask 1's program
    assert "left in PyTorch after their subtask failed: linear+tanh+mul" in prompts[4]
    assert "VERDICT passed 0.9" in prompts[4]
    assert "max abs error 0.3" in prompts[2]  # repairs see the Verifier's findings
    # the stitch step is asked for the group the build left in PyTorch
    assert "still PyTorch: linear+tanh+mul" in prompts[5]
    assert "write the groups still in PyTorch (linear+tanh+mul) in CUDA as well" in prompts[5]
    assert result.best_index == 6 and result.stopped == "target_met"
    assert "linear+tanh+mul left in PyTorch by the build" in result.message
    # subtask 3's program is partial: group 2 is still PyTorch in it
    assert result.attempts[4].partial is True


def test_cancel_in_a_subtask_ends_the_run_and_keeps_nothing(endpoint, mlp3, tmp_path):
    endpoint.script.coder.extend(
        [
            step_reply("VERDICT passed 1.5", custom=("k1",)),
            step_reply("VERDICT passed 1.5", custom=("k1", "k2")),
        ]
    )
    cancel = threading.Event()

    class Cancelling(list):
        def append(self, msg: str) -> None:
            super().append(msg)
            if msg.startswith("Subtask 2/3"):
                cancel.set()

    progress = Cancelling()
    loop, verifier = make_loop(endpoint, mlp3, tmp_path, cancel=cancel, progress=progress)
    result = loop.run()
    assert result.stopped == "cancelled" and result.best is None and result.output is None
    assert "nothing was written" in result.message
    assert len(verifier.calls) == 1  # subtask 1 only
    assert [o.status for o in result.subtasks] == ["done", "stopped", "not_reached"]
    assert not any(a.accepted for a in result.attempts)


def test_stopping_midway_never_keeps_a_partial_program(endpoint, mlp3, tmp_path):
    """The endpoint fails in subtask 2: subtask 1's program passed, but it is a partial step,
    so nothing is written."""
    endpoint.script.coder.append(step_reply("VERDICT passed 3.0", custom=("k1",)))
    loop, _ = make_loop(endpoint, mlp3, tmp_path)
    result = loop.run()
    assert result.stopped == "endpoint" and result.best is None
    assert [o.status for o in result.subtasks] == ["done", "stopped", "not_reached"]
    assert "nothing was written" in result.message


def test_one_group_keeps_the_one_shot_run(endpoint, reference, tmp_path):
    endpoint.script.coder.append(reply("VERDICT passed 1.5"))
    progress: list[str] = []
    loop, _ = make_loop(endpoint, reference, tmp_path, analyze=fake_analysis, progress=progress)
    result = loop.run()
    assert result.subtasks == [] and result.attempts[0].phase == "single"
    assert progress[:2] == ["Planning", "Coding attempt 1/5"]
    assert "Implement this PyTorch reference" in endpoint.script.prompts("coder")[0]
    rec = records(tmp_path)[0]
    assert rec["phase"] == "single" and rec["subtask"] is None and rec["partial"] is False


def test_single_shot_option_skips_the_subtasks(endpoint, mlp3, tmp_path):
    endpoint.script.coder.append(reply("VERDICT passed 1.5"))
    loop, _ = make_loop(endpoint, mlp3, tmp_path)
    loop.opt.stepwise = False
    result = loop.run()
    assert result.subtasks == [] and [a.phase for a in result.attempts] == ["single"]


def test_the_builtin_whole_program_is_the_start_when_it_passes(endpoint, mlp3, tmp_path):
    endpoint.script.coder.append(reply("VERDICT passed 1.4"))
    loop, _ = make_loop(endpoint, mlp3, tmp_path, max_attempts=1, target_speedup=1.2)
    loop.opt.whole_seed = lambda: candidate("VERDICT passed 0.8")
    result = loop.run()
    first, second = result.attempts
    assert (first.coder, first.phase, first.stage) == ("builtin", "whole", CoderStage.draft)
    assert (second.phase, second.stage) == ("whole", CoderStage.optimize_performance)
    assert [o.status for o in result.subtasks] == ["covered"] * 3
    prompt = endpoint.script.prompts("coder")[0]
    assert "runs at 0.80x over PyTorch eager" in prompt and "VERDICT passed 0.8" in prompt
    assert result.best_index == 2 and result.stopped == "target_met"


def test_a_failing_builtin_whole_program_falls_back_to_subtasks(endpoint, mlp3, tmp_path):
    endpoint.script.coder.extend(
        [
            step_reply("VERDICT passed 1.0", custom=("k1",)),
            step_reply("VERDICT passed 1.0", custom=("k1", "k2")),
            step_reply("VERDICT passed 1.5", custom=("k1", "k2", "k3")),
        ]
    )
    loop, _ = make_loop(endpoint, mlp3, tmp_path, target_speedup=1.2)
    loop.opt.whole_seed = lambda: candidate("VERDICT incorrect MSG 73 of 10000 elements")
    result = loop.run()
    assert result.attempts[0].coder == "builtin" and result.attempts[0].phase == "whole"
    assert any("did not pass (incorrect); building step by step" in n for n in result.notes)
    assert [o.status for o in result.subtasks] == ["done"] * 3
    # the program the subtasks built met the target: no stitch attempt was needed
    assert result.best_index == 4 and result.stopped == "target_met"


def _seed(group: str, verdict: str) -> GroupSeed:
    """A builtin candidate for one group's subproblem (what generate_candidates returns)."""
    source = (
        '"""Generated."""\n'
        "import torch\n\n"
        f'_NOTE = "# {verdict}"\n'
        "_lib = None\n\n\n"
        "def _load():\n"
        "    global _lib\n"
        "    return _lib\n\n\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def __init__(self, fc):\n"
        "        super().__init__()\n\n"
        "    def forward(self, x):\n"
        "        _load()\n"
        "        return x\n"
    )
    inputs, outputs, attrs = {
        "k1": (["x"], ["relu"], ["fc1"]),
        "k3": (["mul"], ["sigmoid"], ["fc3"]),
    }[group]
    return GroupSeed(Subproblem(group, "", inputs, outputs, attrs), source)


def test_builtin_seeds_are_spliced_and_the_llm_writes_the_rest(endpoint, mlp3, tmp_path):
    endpoint.script.coder.extend(
        [
            step_reply("VERDICT passed 1.0", custom=("k1", "k2")),  # subtask 2, by the LLM
            step_reply("VERDICT passed 1.3", custom=("k1", "k2", "k3")),  # subtask 3, repaired
        ]
    )
    loop, verifier = make_loop(endpoint, mlp3, tmp_path, target_speedup=1.2)
    asked: list[list[str]] = []

    def seeds(scaffold, subtasks):
        asked.append([st.group for st in subtasks])
        return {"k1": _seed("k1", "VERDICT passed 0.9"), "k3": _seed("k3", "VERDICT incorrect")}

    loop.opt.seed_groups = seeds
    result = loop.run()

    assert asked == [["k1", "k2", "k3"]]
    a = result.attempts
    assert [(x.coder, x.subtask.index) for x in a] == [
        ("builtin", 1),
        ("llm", 2),
        ("builtin", 3),
        ("llm", 3),
    ]
    assert [o.status for o in result.subtasks] == ["seeded", "done", "done"]
    spliced = verifier.calls[0][0]
    assert "relu = _stitch_k1_group(self)(x)" in spliced
    assert "class _stitch_k1_ModelNew(torch.nn.Module)" in spliced
    assert "_stitch_share(sub, model, 'fc1')" in spliced and "_stitch_k1__load()" in spliced
    assert "fc2 = self.fc2(relu)" in spliced  # group 2 is still PyTorch
    # subtask 3's splice went into the LLM's program; when it failed, the LLM drafted the group
    # from that program with the generator's code and the Verifier's finding in front of it
    assert "sigmoid = _stitch_k3_group(self)(mul)" in verifier.calls[2][0]
    assert "VERDICT passed 1.0" in verifier.calls[2][0]
    prompts = endpoint.script.prompts("coder")
    assert len(prompts) == 2 and "This is Subtask 3/3" in prompts[1]
    assert "A deterministic generator wrote this group" in prompts[1]
    assert "Spliced into the block as it is, it did not pass" in prompts[1]
    assert a[3].stage is CoderStage.draft
    recs = records(tmp_path)
    assert recs[0]["metadata"]["coder"] == "builtin" and recs[0]["subtask"]["group"] == "k1"
    assert "_stitch_k1_group" in recs[0]["reply"]


def test_replies_without_code_inside_a_subtask_end_the_run(endpoint, mlp3, tmp_path):
    endpoint.script.coder.extend(["I would write a kernel.", "Still thinking."])
    loop, _ = make_loop(endpoint, mlp3, tmp_path)
    result = loop.run()
    assert result.stopped == "endpoint" and "2 times without a usable code block" in result.message
    assert result.best is None


# ---------------------------------------------------------------- subtasks and partial programs


def _plan(analysis):
    from stitch_lsp.agents.planner import plan_from_analysis

    return plan_from_analysis(analysis)


def test_subtasks_follow_the_forward_and_say_what_each_group_is(mlp3):
    from stitch_lsp.agents.subtasks import describe, plan_subtasks, subtask_budget

    subtasks, note = plan_subtasks(_plan(mlp3_analysis(mlp3, None)))
    assert note is None
    assert [(s.index, s.total, s.group, s.label) for s in subtasks] == [
        (1, 3, "k1", "linear+relu"),
        (2, 3, "k2", "linear+tanh+mul"),
        (3, 3, "k3", "linear+sigmoid"),
    ]
    st = subtasks[1]
    assert (st.inputs, st.outputs, st.lines) == (["relu"], ["mul"], [17])
    assert st.bottleneck.startswith("fc2 (Linear, compute-bound): floor ")
    assert "- tanh: tanh -> [256, 1024], line 17" in describe(st)
    assert [subtask_budget(n) for n in (1, 2, 3, 5, 10)] == [2, 2, 2, 3, 5]


def test_a_plan_whose_groups_are_not_runs_falls_back_and_many_groups_merge(mlp3):
    from stitch_lsp.agents.subtasks import plan_subtasks
    from stitch_lsp.models.agents import PlannedGroup

    plan = _plan(mlp3_analysis(mlp3, None))
    plan.fusion_groups = [
        PlannedGroup(name="a", ops=["fc1", "fc2"]),  # not consecutive: relu is between
        PlannedGroup(name="b", ops=["relu", "tanh", "mul", "fc3", "sigmoid"]),
    ]
    subtasks, note = plan_subtasks(plan)
    assert [s.group for s in subtasks] == ["k1", "k2", "k3"]
    assert note is not None and "follow the analysis's groups" in note

    plan.fusion_groups = [
        PlannedGroup(name=f"g{i}", ops=[op.node]) for i, op in enumerate(plan.analysis.ops)
    ]
    subtasks, note = plan_subtasks(plan, limit=3)
    assert [s.groups for s in subtasks] == [["g0", "g1", "g2"], ["g3", "g4"], ["g5", "g6"]]
    assert (
        subtasks[0].group == "g0+g1+g2"
        and note == "7 fusion groups merged into 3 subtasks of adjacent groups"
    )


def test_splicing_renames_the_generated_module_and_keeps_its_cuda(mlp3):
    from stitch_lsp.agents import partial
    from stitch_lsp.agents.subtasks import plan_subtasks

    analysis = mlp3_analysis(mlp3, None)
    subtasks, _ = plan_subtasks(_plan(analysis))
    program = partial.compose(analysis.scaffold, subtasks)
    assert partial.find_block(program, "k2") is not None
    sub = partial.subproblem(analysis.scaffold, subtasks[1], mlp3)
    assert sub is not None and (sub.inputs, sub.outputs, sub.attrs) == (["relu"], ["mul"], ["fc2"])
    assert "def forward(self, relu):" in sub.source and "return mul" in sub.source
    assert "torch.randn((256, 1024), dtype=torch.float32)" in sub.source
    generated = (
        "import torch\n"
        'SRC = r"""__global__ void k(float* SRC) {}"""\n'
        "_lib = None\n\n\n"
        "def _load():\n"
        "    global _lib\n"
        "    _lib = load_cuda(SRC, name='x')\n"
        "    return _lib\n\n\n"
        "class ModelNew(torch.nn.Module):\n"
        "    def forward(self, relu):\n"
        "        self._lib = _load()\n"
        "        return relu\n"
    )
    out = partial.splice(program, subtasks[1], generated, sub)
    assert out is not None
    assert '_stitch_k2_SRC = r"""__global__ void k(float* SRC) {}"""' in out  # strings kept
    assert "global _stitch_k2__lib" in out and "self._lib = _stitch_k2__load()" in out
    assert "mul = _stitch_k2_group(self)(relu)" in out
    assert "    _stitch_k2__load()  # its kernels: built once, then cached" in out
    assert "fc1 = self.fc1(x)" in out and "fc3 = self.fc3(mul)" in out  # other blocks untouched
    compile(out, "spliced", "exec")
    # a program that lost the block's markers cannot take the splice
    assert (
        partial.splice(out.replace("# >>> stitch k3", "# k3"), subtasks[2], generated, sub) is None
    )


def test_without_a_scaffold_each_subtask_starts_from_the_reference(endpoint, mlp3, tmp_path):
    """torch.fx could not write the forward flat (module hooks, a constant made in forward):
    subtask 1 starts from the reference, later ones from the last program, blocks or not."""

    def no_scaffold(reference, settings, **kw):
        analysis = mlp3_analysis(reference, settings, **kw)
        analysis.scaffold = None
        return analysis

    endpoint.script.coder.extend(
        [
            reply("VERDICT passed 1.0"),  # a program without blocks
            reply("VERDICT passed 1.0"),
            reply("VERDICT passed 1.5"),
        ]
    )
    loop, _ = make_loop(endpoint, mlp3, tmp_path, analyze=no_scaffold, target_speedup=1.2)
    result = loop.run()
    assert [o.status for o in result.subtasks] == ["done"] * 3
    assert any("no flat forward from torch.fx" in n for n in result.notes)
    first, second, _ = endpoint.script.prompts("coder")
    assert "There is no partial program yet: start from the reference." in first
    assert "Mark the block you write with `# >>> stitch k1`" in first
    assert "The current partial program:" in second
    assert "Mark the block you write with `# >>> stitch k2`" in second
