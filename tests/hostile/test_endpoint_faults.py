"""An LLM endpoint that misbehaves: trickles, sends garbage or JSON cut in half, asks to retry
later. The call ends within llmTimeoutS, a bad reply is tried once more, then the run ends with
a message that says what happened, and no traceback and no file."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from stitch_lsp.agents.llm import ChatClient, EndpointError
from stitch_lsp.config import Settings
from tests.agents.fake_openai import Fail, FakeOpenAI

DATA = Path(__file__).resolve().parents[1] / "agents" / "data"
MESSAGES = [{"role": "system", "content": "coder"}, {"role": "user", "content": "write"}]


def client(endpoint: FakeOpenAI, **settings: object) -> ChatClient:
    values = {"llm_base_url": endpoint.base_url, "llm_model": "m", "llm_timeout_s": 10.0}
    return ChatClient(Settings.from_sources(**{**values, **settings}), backoff_s=0.01)


@pytest.mark.slow
def test_a_trickle_ends_at_the_timeout() -> None:
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.append(Fail(trickle_s=1.0, text="slow"))
        started = time.monotonic()
        with pytest.raises(EndpointError) as err:
            client(endpoint, llm_timeout_s=5.0).chat(MESSAGES)
        elapsed = time.monotonic() - started
    assert err.value.kind == "timeout"
    assert "did not answer within 5 s" in str(err.value)
    assert 4.5 <= elapsed < 8.0
    assert len(endpoint.script.requests) == 1  # the time was spent: no retry past the limit


@pytest.mark.parametrize("fault", [Fail(garbage=True), Fail(cut_json=True, text="half")])
def test_garbage_is_tried_once_more_then_named(fault: Fail) -> None:
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend([fault, fault, fault])
        with pytest.raises(EndpointError) as err:
            client(endpoint).chat(MESSAGES)
    assert err.value.kind == "malformed"
    assert "not valid JSON" in str(err.value) and "after 2 tries" in str(err.value)
    assert len(endpoint.script.requests) == 2


def test_garbage_then_a_good_reply_succeeds() -> None:
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend([Fail(garbage=True), "fine"])
        assert client(endpoint).chat(MESSAGES).text == "fine"


def test_retry_after_is_honoured() -> None:
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend([Fail(429, retry_after="1", text="slow down"), "ok"])
        started = time.monotonic()
        reply = client(endpoint).chat(MESSAGES)
        elapsed = time.monotonic() - started
    assert reply.text == "ok"
    assert elapsed >= 1.0


def test_retry_after_past_the_limit_ends_at_once() -> None:
    with FakeOpenAI() as endpoint:
        endpoint.script.coder.extend([Fail(503, retry_after="3600", text="maintenance")])
        started = time.monotonic()
        with pytest.raises(EndpointError) as err:
            client(endpoint, llm_timeout_s=5.0).chat(MESSAGES)
        elapsed = time.monotonic() - started
    assert "retry after 3600 s" in str(err.value) and "llmTimeoutS" in str(err.value)
    assert elapsed < 3.0
    assert len(endpoint.script.requests) == 1


@pytest.mark.slow
def test_generate_against_a_garbage_endpoint_says_so_and_writes_nothing(tmp_path: Path) -> None:
    pytest.importorskip("torch")  # the Planner's worker
    ref = Path(shutil.copy(DATA / "scale_relu.py", tmp_path / "scale_relu.py"))
    with FakeOpenAI() as endpoint:
        endpoint.script.planner.extend([Fail(garbage=True)] * 2)
        endpoint.script.coder.extend([Fail(garbage=True)] * 4)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "stitch_lsp",
                "generate",
                str(ref),
                "--coder",
                "llm",
                "--base-url",
                endpoint.base_url,
                "--verify",
                "compile",
                "--no-seed",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    out = json.loads(proc.stdout)
    assert out["diagnostics"] == [] and "not valid JSON" in out["error"]
    assert out["output"] is None
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".py") == ["scale_relu.py"]
