"""A reply body is read no further than a cap: a huge reply is rejected, said so in the attempt,
and kept out of the trajectory, whose text fields are bounded too."""

from __future__ import annotations

from pathlib import Path

import pytest

from stitch_lsp.agents.llm import ChatClient, EndpointError, reply_cap
from stitch_lsp.agents.trajectory import MAX_FIELD_CHARS, bounded
from stitch_lsp.config import Settings
from tests.agents.fake_openai import Fail, FakeOpenAI
from tests.agents.helpers import records, reply
from tests.agents.test_loop_llm import make_loop

HUGE = "x" * 50_000_000  # 50 MB of reply text


def _client(endpoint: FakeOpenAI) -> ChatClient:
    s = Settings.from_sources(
        llm_base_url=endpoint.base_url, llm_model="test-model", llm_timeout_s=10.0
    )
    return ChatClient(s, retries=0, backoff_s=0.01)


def test_the_cap_is_a_mebibyte_at_least_and_grows_with_max_tokens() -> None:
    assert reply_cap(Settings.from_sources()) == 2**20
    assert reply_cap(Settings.from_sources(llm_max_tokens=100_000)) == 100_000 * 32


@pytest.mark.parametrize("declared", [True, False])
def test_a_huge_reply_is_refused_without_reading_it_all(
    endpoint: FakeOpenAI, declared: bool
) -> None:
    endpoint.script.coder.append(HUGE if declared else Fail(text=HUGE, undeclared=True))
    with pytest.raises(EndpointError) as info:
        _client(endpoint).chat([{"role": "user", "content": "write it"}])
    assert info.value.kind == "too_large"
    assert "larger than 1,048,576 bytes" in str(info.value)


def test_a_reply_without_declared_length_under_the_cap_still_reads(endpoint: FakeOpenAI) -> None:
    endpoint.script.coder.append(Fail(text="fine", undeclared=True))
    assert _client(endpoint).chat([{"role": "user", "content": "hi"}]).text == "fine"


def test_two_huge_replies_end_the_run_with_a_small_trajectory(
    endpoint: FakeOpenAI, reference: Path, tmp_path: Path
) -> None:
    endpoint.script.coder.extend([HUGE, HUGE])
    loop, verifier = make_loop(endpoint, reference, tmp_path, llm_timeout_s=20.0)
    result = loop.run()
    assert result.best is None or result.best.code is None
    assert "without a usable code block" in result.message
    (traj,) = (tmp_path / "traj").glob("*.jsonl")
    assert traj.stat().st_size < 200_000  # the two replies were 100 MB
    recs = records(tmp_path)
    assert len(recs) == 2
    for rec in recs:
        assert rec["finish_reason"] == "too_large"
        assert rec["reply"] == ""
        assert rec["verify"]["status"] == "no_code"
        assert "larger than 1,048,576 bytes" in rec["verify"]["message"]
    assert verifier.calls == []


def test_a_normal_reply_after_a_huge_one_is_used(
    endpoint: FakeOpenAI, reference: Path, tmp_path: Path
) -> None:
    endpoint.script.coder.extend([HUGE, reply("VERDICT passed 1.5")])
    loop, _ = make_loop(endpoint, reference, tmp_path, llm_timeout_s=20.0)
    result = loop.run()
    assert result.best is not None and result.best.verdict.status == "passed"
    first, second = records(tmp_path)
    assert first["verify"]["status"] == "no_code" and second["verify"]["status"] == "passed"


def test_trajectory_fields_are_cut_with_a_marker() -> None:
    rec = {"reply": "y" * (MAX_FIELD_CHARS + 10), "messages": [{"content": "z" * 5}], "n": 3}
    out = bounded(rec)
    assert out["reply"].startswith("y" * MAX_FIELD_CHARS)
    assert out["reply"].endswith(f"[stitch-lsp: 10 of {MAX_FIELD_CHARS + 10:,} characters cut]")
    assert out["messages"] == [{"content": "zzzzz"}] and out["n"] == 3
