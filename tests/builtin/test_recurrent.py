"""CPU: recurrent modules are captured as one IR node with the right shapes, refused clearly
where they would not match the reference, and their generated programs compile with nvcc."""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .cuda_headers import cublas_include
from .helpers import generate_for, serious_findings, write_problem
from .rnn_problems import CASES, RnnCase

pytest.importorskip("torch")


def _capture(tmp_path: Path, case: RnnCase):  # type: ignore[no-untyped-def]
    from stitch_lsp.compiler.worker.capture import capture

    return capture(write_problem(tmp_path, case.name, case.source()))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_module_is_one_node_with_its_results(tmp_path: Path, case: RnnCase) -> None:
    graph = _capture(tmp_path, case)
    rnns = [n for n in graph.nodes if n.kind == "rnn"]
    assert len(rnns) == 1
    rnn = rnns[0]
    spec = rnn.params["spec"]
    d = 2 if case.bidirectional else 1
    assert (spec.layers, spec.directions, spec.hidden) == (case.layers, d, case.hidden)
    assert spec.batch_first == case.batch_first and spec.bias == case.bias
    assert spec.has_h0 == case.with_state
    assert spec.mode == {"LSTM": "lstm", "GRU": "gru"}.get(case.cls, f"rnn_{case.nonlinearity}")
    seq = (case.batch, case.seq, d * case.hidden) if case.batch_first else (case.seq, case.batch)
    assert rnn.shape[: len(seq)] == seq
    # x, the states given, then 2 (or 4 with biases) weights per layer and direction.
    per = 4 if case.bias else 2
    states = (2 if case.cls == "LSTM" else 1) if case.with_state else 0
    assert len(rnn.args) == 1 + states + per * case.layers * d
    outs = {n.fn: n for n in graph.nodes if n.kind == "rnn_out"}
    state_shape = (case.layers * d, case.batch, case.hidden)
    assert outs["h_n"].shape == state_shape
    assert ("c_n" in outs) == (case.cls == "LSTM")
    if case.returns == "last_step":
        assert outs["seq_at"].shape == (case.batch, d * case.hidden)
        assert outs["seq_at"].params["index"] == case.seq - 1
        assert any(n.kind == "gemm" for n in graph.nodes)
    if case.returns == "last_layer":
        assert outs["h_at"].shape == state_shape[1:]
        assert outs["h_at"].params["index"] == case.layers * d - 1


def test_lstm_level3_problem_draws_its_initial_state(kernelbench_dir: Path) -> None:
    """35_LSTM makes h0/c0 with torch.randn in forward: the candidate does the same."""
    cand = generate_for(kernelbench_dir / "level3" / "35_LSTM.py")
    assert cand.handled, cand.reason
    src = cand.source or ""
    assert src.count("torch.randn((6, 10, 256), device=dev)") == 2
    assert "def forward(self, x, h0=None, c0=None):" in src
    assert [g.kind for g in cand.groups] == ["rnn", "gemm"]
    assert "step GEMMs" in cand.groups[0].ops[0] or "stitch_lstm" in cand.groups[0].name


def test_training_dropout_between_layers_is_refused(tmp_path: Path) -> None:
    src = (
        RnnCase("LSTM")
        .source()
        .replace("bidirectional=False)", "bidirectional=False, dropout=0.5)")
    )
    cand = generate_for(write_problem(tmp_path, "lstm_dropout", src))
    assert not cand.handled
    assert "dropout=0.5" in cand.reason and ".eval()" in cand.reason
    evaluated = src.replace("        self.fc =", "        self.rnn.eval()\n        self.fc =")
    assert generate_for(write_problem(tmp_path, "lstm_dropout_eval", evaluated)).handled


def test_proj_size_is_refused(tmp_path: Path) -> None:
    src = (
        RnnCase("LSTM", returns="seq")
        .source()
        .replace("bidirectional=False)", "bidirectional=False, proj_size=4)")
    )
    cand = generate_for(write_problem(tmp_path, "lstm_proj", src))
    assert not cand.handled and "proj_size" in cand.reason


def test_candidate_passes_static_checks(tmp_path: Path) -> None:
    for case in CASES[:3]:
        cand = generate_for(write_problem(tmp_path, case.name, case.source()))
        assert cand.handled, cand.reason
        path = tmp_path / f"{case.name}_builtin.py"
        path.write_text(cand.source or "")
        assert not serious_findings(path)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
def test_every_variant_compiles_for_sm90a(tmp_path: Path) -> None:
    from stitch_lsp.runtime import build_cuda

    include = cublas_include()
    if include is None:
        pytest.skip("no cuBLAS headers (CUDA toolkit or the nvidia-cublas wheel)")
    sources = {}
    for case in CASES:
        cand = generate_for(write_problem(tmp_path, case.name, case.source()))
        assert cand.handled, cand.reason
        sources[case.name] = cand.cuda_source

    def build(name: str) -> None:
        build_cuda(
            sources[name],
            name=f"rnn_{name}",
            extra_flags=[f"-I{include}"] if include else [],
            libraries=(),
            arch="sm_90a",
        )

    with ThreadPoolExecutor(max_workers=2) as ex:
        list(ex.map(build, sources))
