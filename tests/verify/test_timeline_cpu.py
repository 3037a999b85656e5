"""Timelines and the side-stream check from recorded device activity (synthetic records)."""

from __future__ import annotations

import pytest

from stitch_lsp.models.verify import Timeline
from stitch_lsp.verify.timeline import (
    Activity,
    RecordingError,
    advice,
    describe,
    overrun_ns,
    short_name,
    split_calls,
    summarise,
)
from stitch_lsp.verify.worker.exploits import check_side_stream

US = 1_000  # ns
MAIN, SIDE = 7, 13


def marker(t_us: float) -> Activity:
    return Activity(
        "void at::cuda::(anonymous namespace)::spin_kernel(long)",
        MAIN,
        int(t_us * US),
        int((t_us + 1) * US),
    )


def kernel(
    name: str, start_us: float, end_us: float, stream: int = MAIN, kind: str = "kernel"
) -> Activity:
    return Activity(name, stream, int(start_us * US), int(end_us * US), kind)


def forward(t0: float, *, side_overrun: float | None = None) -> list[Activity]:
    """Markers at t0 and t0+100 us; a GEMM 5-45, a gap, an epilogue 60-70, a copy 80-85."""
    work = [
        marker(t0),
        kernel("void gemm_kernel<float, 128>(float const*, float*)", t0 + 5, t0 + 45),
        kernel("void epilogue<float>(float*)", t0 + 60, t0 + 70),
        kernel("Memcpy DtoD (Device -> Device)", t0 + 80, t0 + 85, kind="memcpy"),
        marker(t0 + 100),
    ]
    if side_overrun is not None:  # work on another stream still running after the end marker
        work.append(kernel("void sneaky<float>(float*)", t0 + 20, t0 + 101 + side_overrun, SIDE))
    return work


def test_split_and_summarise_a_recording() -> None:
    records = forward(0) + forward(1000) + forward(2000)
    calls = split_calls(records, 3)
    assert [len(c.work) for c in calls] == [3, 3, 3]
    assert calls[1].start_ns == 1001 * US and calls[1].end_ns == 1100 * US
    t = summarise(calls, host_ms=0.05)
    assert t.forwards == 3 and t.kernels == 2 and t.copies == 1 and t.streams == 1
    assert t.window_ms == pytest.approx(0.099)
    assert t.busy_ms == pytest.approx(0.055)  # 40 + 10 + 5 us
    assert t.busy_fraction == pytest.approx(55 / 99)
    # idle: 1->5, 45->60, 70->80, 85->100 us: four gaps per forward
    assert t.gaps == 4 and t.gap_ms == pytest.approx(0.044) and t.max_gap_ms == pytest.approx(0.015)
    assert [k.name for k in t.top] == ["gemm_kernel", "epilogue"]
    assert t.top[0].share == pytest.approx(0.8) and t.top[0].calls == 1
    assert t.host_ms == 0.05
    text = describe(t)
    assert text.startswith("2 kernels + 1 copies, GPU busy 56% of 0.099 ms, 4 gaps")
    assert "host 0.050 ms per call" in text
    assert "launch and host overhead" in (advice(t) or "")


def test_markers_must_pair_up() -> None:
    with pytest.raises(RecordingError, match="expected 4 marker kernels, found 2"):
        split_calls(forward(0), 2)
    forged = [*forward(0), marker(50)]  # the code under test launched the marker kernel
    with pytest.raises(RecordingError):
        split_calls(forged, 1)
    with pytest.raises(RecordingError):
        summarise([])


def test_side_stream_work_is_found_by_its_own_records() -> None:
    joined = split_calls(forward(0) + forward(1000), 2)
    assert check_side_stream(joined) == []
    assert all(overrun_ns(c) == 0 for c in joined)
    # Another process's kernels never appear in these records, so a busy GPU changes nothing.
    left = split_calls(forward(0, side_overrun=300) + forward(1000, side_overrun=250), 2)
    found = check_side_stream(left)
    assert [f.code for f in found] == ["stitch.exploit.side-stream"]
    assert found[0].evidence["overrun_ms"] == pytest.approx(0.251)
    assert "stream(s) 13" in found[0].message
    t = summarise(left)
    assert t.streams == 2 and t.window_ms > 0.3


def test_a_single_late_record_is_not_enough() -> None:
    calls = split_calls(forward(0, side_overrun=300) + forward(1000), 2)
    assert check_side_stream(calls) == []  # every forward must overrun


def test_short_names() -> None:
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float> >"
    assert short_name(fill + "(int, float*)") == "at::native::vectorized_elementwise_kernel"
    assert short_name("Memcpy DtoD (Device -> Device)") == "Memcpy DtoD"
    assert short_name("sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32") == (
        "sm90_xmma_gemm_f32f32_tf32f32_f32_tn_n_tilesize128x128x32"
    )


def test_timeline_model_round_trips() -> None:
    t = summarise(split_calls(forward(0), 1), host_ms=None)
    again = Timeline.model_validate_json(t.model_dump_json())
    assert again == t and again.host_ms is None
    with pytest.raises(ValueError):
        Timeline.model_validate({"forwards": 1})
