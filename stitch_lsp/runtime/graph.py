"""Replay a generated forward as a CUDA graph, or run it as plain launches and say why.

A generated forward is a fixed sequence of launches (our kernels, cuBLAS, cuDNN through PyTorch)
on the current stream. Replaying it as one `torch.cuda.CUDAGraph` removes the host cost of every
launch, which dominates small and step-by-step models (an LSTM launches twice per time step).

The life of one input signature (shapes, strides, dtypes, devices, and what `guard` returns):

1. warm-up: the first call runs plainly. It is a real call (its results are returned, its
   running statistics updated) and it makes every lazy allocation outside a capture: library
   handles, cuBLAS workspaces, the buffer arena, cuDNN's algorithm choice.
2. capture: the second call copies its inputs into static buffers and captures the forward on
   them (nothing runs during a capture), then replays it once.
3. replay: every later call copies its inputs into the static buffers, replays the graph, and
   returns *fresh* copies of the outputs: memory handed to a caller is never written again.

A new signature is captured again. Plain launches are used, with `reason` saying why, when the
switch is off (`STITCH_CUDA_GRAPH=0`), when an input is on the CPU, when the call is itself being
captured (an outer graph records our launches), when the capture failed (an op that syncs the
host, for instance), or when the graph would not pay: replay copies every input in and every
output out, and for a forward of few launches over large tensors (a level-1 ReLU over 6 GB, a
convolution over a large batch) those copies cost far more than the launches they save. The
generator says how many stages a forward has (`stages`); after the warm-up call the runner
compares their host cost with the copies' and keeps plain launches when the copies lose
(`STITCH_CUDA_GRAPH=force` replays regardless, for benchmarks). That rule is a model of costs,
and on a GPU it chose replay for 11 of 317 programs timed faster plain (held-out level 2's
44_ConvTranspose2d_Multiply_GlobalAvgPool_GlobalAvgPool_Mean: 0.152 ms replayed, 0.099 ms
plain, H100, 2026-12-07): plain launches overlap the GPU's work whenever it outlasts them. So a
forward that changes no state (`timed`: no running statistics, no cache writes, no random
draws, which running it again would repeat) is timed both ways on its capture call, and keeps
plain launches when they are clearly faster.

This module needs only torch and the standard library, so it can be inlined into a candidate
that has to stand alone.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import Any

ENV_SWITCH = "STITCH_CUDA_GRAPH"
# What one stage of a generated forward costs the host when launched plainly (Python, ctypes
# or a torch op such as a cuDNN convolution, one to three launches), and how fast a
# device-to-device copy moves bytes. Calibrated on the H200 (2026-12-03): a level-2 program
# with 2 stages and 788 MB of inputs and outputs ran 0.35 ms slower under replay (2.2e12 B/s);
# ResNet's basic block, 6 stages and 134 MB, ran 17 us faster under replay than plain.
HOST_SECONDS_PER_STAGE = 15e-6
COPY_BYTES_PER_SECOND = 2.0e12
TIMED_RUNS = 3  # each way, on the capture call of a `timed` forward
TIMED_MARGIN = 0.9  # plain launches are kept only below this fraction of replay's time


def graph_pays(stages: int, copied_bytes: int) -> tuple[bool, str]:
    """Whether replay (which copies `copied_bytes` in and out per call) beats launching
    `stages` stages plainly, and, when it does not, the reason the runner reports."""
    host = stages * HOST_SECONDS_PER_STAGE
    copies = copied_bytes / COPY_BYTES_PER_SECOND
    if stages > 1 and host > copies:
        return True, ""
    return False, (
        f"plain launches: a CUDA graph would copy {copied_bytes / 1e6:.1f} MB of inputs and "
        f"outputs per call (about {copies * 1e6:.0f} us) to save the host cost of {stages} "
        f"stage{'s' if stages != 1 else ''} (about {host * 1e6:.0f} us)"
    )


def graphs_enabled() -> bool:
    """False when `STITCH_CUDA_GRAPH` is 0/off/false/no (read on every call, so a benchmark can
    time the same candidate both ways)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "off", "false", "no")


def graphs_forced() -> bool:
    """True when `STITCH_CUDA_GRAPH` is `force`: replay even where the copies would cost more
    than the launches save (for benchmarks that time every program both ways)."""
    return os.environ.get(ENV_SWITCH, "1").strip().lower() == "force"


class TorchBackend:
    """The CUDA operations the runner needs; tests substitute a fake."""

    def __init__(self) -> None:
        import torch

        self.torch = torch

    def is_tensor(self, value: Any) -> bool:
        return isinstance(value, self.torch.Tensor)

    def on_gpu(self, value: Any) -> bool:
        return bool(value.is_cuda)

    def capturing(self) -> bool:
        return bool(self.torch.cuda.is_current_stream_capturing())

    def signature(self, value: Any) -> Hashable:
        return (tuple(value.shape), value.stride(), value.dtype, value.device)

    def static_copy(self, value: Any) -> Any:
        return value.clone()

    def copy_into(self, static: Any, value: Any) -> None:
        static.copy_(value)

    def capture(self, fn: Callable[..., Any], args: list[Any]) -> tuple[Any, Any]:
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            out = fn(*args)
        return graph, out

    def replay(self, graph: Any) -> None:
        graph.replay()

    def fresh(self, value: Any) -> Any:
        return value.clone()

    def seconds(self, fn: Callable[[], Any]) -> float:
        """Wall time of `fn` with the device idle before and done after: a call as its caller
        sees it, host launch work and GPU work together."""
        import time

        self.torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        self.torch.cuda.synchronize()
        return time.perf_counter() - start

    def nbytes(self, value: Any) -> int:
        return int(value.numel() * value.element_size())


class GraphRunner:
    """Calls `body(*args)` through a CUDA graph per input signature (see the module docstring).

    `guard` returns whatever else the captured graph depends on, e.g. the addresses of the
    parameters it reads: when that changes (the module was moved), the graph is captured again.
    `stages` is how many stages one forward has (None: many launches, e.g. per time step; the
    graph is then always tried). `timed`: the forward changes no state, so its capture call may
    run it again to time plain launches against replay.
    """

    def __init__(
        self,
        body: Callable[..., Any],
        *,
        guard: Callable[[], Hashable] | None = None,
        warmup: int = 1,
        backend: Any = None,
        stages: int | None = None,
        plain: str = "",
        timed: bool = False,
    ) -> None:
        self.body = body
        self.timed = timed
        self.plain = plain  # why every call runs plain launches (the program syncs the host)
        self.guard = guard
        self.warmup = warmup
        self.stages = stages
        self._backend = backend
        self._entries: dict[Hashable, dict[str, Any]] = {}
        self.mode = "idle"  # what the last call did: plain, warmup, capture or replay
        self.reason = ""  # why the last call ran plain launches ("" otherwise)
        self.captures = 0

    @property
    def backend(self) -> Any:
        if self._backend is None:
            self._backend = TorchBackend()
        return self._backend

    def __deepcopy__(self, memo: dict[int, Any]) -> GraphRunner:
        import copy

        # A copied module gets its own graphs: captured ones point at the original's memory.
        return GraphRunner(
            copy.deepcopy(self.body, memo),
            guard=copy.deepcopy(self.guard, memo),
            warmup=self.warmup,
            backend=self._backend,
            stages=self.stages,
            plain=self.plain,
            timed=self.timed,
        )

    def _plain(self, args: tuple[Any, ...], reason: str) -> Any:
        self.mode, self.reason = "plain", reason
        return self.body(*args)

    def _why_plain(self, args: tuple[Any, ...]) -> str:
        if self.plain:
            return f"plain launches: {self.plain}"
        if not graphs_enabled():
            return f"CUDA graph replay is switched off ({ENV_SWITCH}=0)"
        be = self.backend
        tensors = [a for a in args if be.is_tensor(a)]
        if not tensors:
            return "no tensor inputs"
        if not all(be.on_gpu(t) for t in tensors):
            return "an input is on the CPU"
        if be.capturing():
            return "the caller is capturing a CUDA graph itself; our launches join it"
        return ""

    def key(self, args: tuple[Any, ...]) -> Hashable:
        be = self.backend
        parts: list[Hashable] = [
            ("t", be.signature(a)) if be.is_tensor(a) else ("v", repr(a)) for a in args
        ]
        if self.guard is not None:
            parts.append(("guard", self.guard()))
        return tuple(parts)

    def __call__(self, *args: Any) -> Any:
        why = self._why_plain(args)
        if why:
            return self._plain(args, why)
        entry = self._entries.setdefault(self.key(args), {"calls": 0})
        if entry.get("reason"):
            return self._plain(args, entry["reason"])
        if entry["calls"] < self.warmup:
            entry["calls"] += 1
            self.mode, self.reason = "warmup", ""
            out = self.body(*args)
            if self.stages is not None:  # the replay rule weighs the copies (outputs included)
                entry["out_bytes"] = self._bytes(out)
            return out
        be = self.backend
        if "graph" not in entry and self.stages is not None and not graphs_forced():
            copied = self._bytes(args) + entry.get("out_bytes", 0)
            pays, why = graph_pays(self.stages, copied)
            if not pays:
                entry["reason"] = why
                return self._plain(args, why)
        captured = "graph" not in entry
        if captured:
            static = [be.static_copy(a) if be.is_tensor(a) else a for a in args]
            try:
                graph, out = be.capture(self.body, static)
            except Exception as exc:  # an op that cannot be captured: plain launches from now on
                entry["reason"] = f"capture failed: {type(exc).__name__}: {exc}"[:300]
                return self._plain(args, entry["reason"])
            entry.update(graph=graph, static=static, out=out)
            self.captures += 1
            self.mode = "capture"
        else:
            self.mode = "replay"
        result = self._replay(entry, args)
        self.reason = ""
        if captured and self._times_both_ways():
            self._keep_the_faster(entry, args)
        return result

    def _replay(self, entry: dict[str, Any], args: tuple[Any, ...]) -> Any:
        """One call through the graph: inputs copied in, replay, fresh copies of the outputs."""
        be = self.backend
        for s, a in zip(entry["static"], args, strict=True):
            if be.is_tensor(a):
                be.copy_into(s, a)
        be.replay(entry["graph"])
        return _map_tensors(entry["out"], be)

    def _times_both_ways(self) -> bool:
        return (
            self.timed
            and self.stages is not None
            and not graphs_forced()
            and hasattr(self.backend, "seconds")
        )

    def _keep_the_faster(self, entry: dict[str, Any], args: tuple[Any, ...]) -> None:
        """Time replay and plain launches on this call's inputs (TIMED_RUNS each, alternating);
        where plain is under TIMED_MARGIN of replay, later calls of this signature run plain
        and say why. Only for a `timed` forward: each run repeats the whole forward."""
        be = self.backend
        replay: list[float] = []
        plain: list[float] = []
        for _ in range(TIMED_RUNS):
            replay.append(be.seconds(lambda: self._replay(entry, args)))
            plain.append(be.seconds(lambda: self.body(*args)))
        r, p = sorted(replay)[TIMED_RUNS // 2], sorted(plain)[TIMED_RUNS // 2]
        entry["timed_us"] = {"replay": r * 1e6, "plain": p * 1e6}
        if p < TIMED_MARGIN * r:
            for key in ("graph", "static", "out"):
                entry.pop(key, None)
            entry["reason"] = (
                f"plain launches: timed faster on the first replay ({p * 1e6:.0f} us a call "
                f"against {r * 1e6:.0f} us replayed with its copies)"
            )

    def _bytes(self, value: Any) -> int:
        be = self.backend
        if be.is_tensor(value):
            return int(be.nbytes(value))
        if isinstance(value, (tuple, list)):
            return sum(self._bytes(v) for v in value)
        return 0


def _map_tensors(out: Any, be: Any) -> Any:
    if be.is_tensor(out):
        return be.fresh(out)
    if isinstance(out, (tuple, list)):
        return type(out)(_map_tensors(o, be) for o in out)
    return out


class Arena:
    """The planned intermediate buffers of a forward: one allocation per device, made on the
    first call and reused by every later call and by the captured graph.

    `layout` holds (byte offset, shape, dtype) per buffer; offsets come from the generator's
    liveness plan, so buffers whose lifetimes do not overlap share bytes.
    """

    def __init__(self, layout: list[tuple[int, tuple[int, ...], Any]], nbytes: int) -> None:
        self.layout = layout
        self.nbytes = nbytes
        self._views: dict[Any, list[Any]] = {}
        # per device: the weights_key of the tensors weight preparation last read
        self.prepared: dict[Any, Hashable] = {}

    @staticmethod
    def weights_key(*tensors: Any) -> Hashable:
        """What decides whether prepared weights are current: each tensor's address and version
        counter (bumped by every in-place write, `copy_`, `load_state_dict` and optimiser
        steps). A key that equals no other, so preparation runs, while a CUDA graph is being
        captured on the current stream (an outer graph must record it) and for inference
        tensors, which keep no version counter."""
        import torch

        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return object()
        try:
            return tuple((t.data_ptr(), t._version) for t in tensors)
        except RuntimeError:  # "Inference tensors do not track version counter"
            return object()

    def __deepcopy__(self, memo: dict[int, Any]) -> Arena:
        return Arena(self.layout, self.nbytes)  # a copied module allocates its own

    def views(self, device: Any) -> list[Any]:
        views = self._views.get(device)
        if views is None:
            import torch

            base = torch.empty(max(self.nbytes, 1), dtype=torch.uint8, device=device)
            views = []
            for offset, shape, dtype in self.layout:
                count = 1
                for d in shape:
                    count *= d
                size = count * torch.empty((), dtype=dtype).element_size()
                views.append(base[offset : offset + size].view(dtype).view(shape))
            self._views[device] = views
        return views
