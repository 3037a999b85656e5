"""The static checks: one id, a one-line explanation and a link for each.

Ids are published as `stitch.<id>` diagnostic codes; the README lists them from here.
"""

from __future__ import annotations

from dataclasses import dataclass

KERNELBENCH = "https://github.com/ScalingIntelligence/KernelBench"
STITCHCUDA = "https://arxiv.org/abs/2603.02637"
CUDA_GUIDE = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/index.html"
CUDA_BEST = "https://docs.nvidia.com/cuda/cuda-c-best-practices-guide/index.html"


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    summary: str
    url: str | None = None

    @property
    def code(self) -> str:
        return f"stitch.{self.id}"


RULES: dict[str, Rule] = {
    r.id: r
    for r in (
        Rule("parse-error", "The file does not parse; checks ran on the parts that did."),
        Rule("encoding", "The file is not valid UTF-8; undecodable bytes were replaced."),
        Rule("file-too-large", "The file is larger than maxFileBytes; deep checks were skipped."),
        Rule("file-missing", "A path given to `check` does not exist or cannot be read."),
        Rule("binary-file", "The file holds binary data (NUL bytes, or mostly not UTF-8)."),
        Rule("parse-timeout", "Parsing the file ran past its time budget; checks were skipped."),
        Rule(
            "too-many-findings",
            "The file has more findings than the editor is sent; the most severe are shown.",
        ),
        Rule(
            "torch-op",
            "ModelNew computes with PyTorch operators (under any name, in Python or ATen from C++, "
            "or through torch.compile/torch.jit) instead of custom CUDA.",
            KERNELBENCH,
        ),
        Rule(
            "torch-fallback",
            "try/except (or a C++ catch) falls back to PyTorch, so a broken kernel still passes.",
            KERNELBENCH,
        ),
        Rule("reference-call", "ModelNew reuses the reference Model's computation.", KERNELBENCH),
        Rule("noop-forward", "forward does nothing (pass, or returns its input).", KERNELBENCH),
        Rule(
            "side-stream",
            "Work on a stream other than the current one escapes CUDA-event timing.",
            KERNELBENCH,
        ),
        Rule("threads", "Threads or processes can run work outside the timed region.", KERNELBENCH),
        Rule("timer-patch", "Code replaces the timers or synchronisation the benchmark relies on."),
        Rule(
            "harness-patch",
            "Code replaces PyTorch's functions the harness compares or times with "
            "(`torch.allclose`, `torch.isclose`, tensor methods), from Python or from C++.",
            KERNELBENCH,
        ),
        Rule(
            "call-count",
            "forward behaves differently by how often or by whom it is called (a call counter, "
            "the call stack): the timed calls need not do the work that was checked.",
            KERNELBENCH,
        ),
        Rule(
            "token-paste",
            "A CUDA, cuBLAS or cuDNN API name is put together with `##`, hiding the call from "
            "review and from checks that look for it.",
            STITCHCUDA,
        ),
        Rule(
            "event-join",
            "A stream waits on an event recorded before the work it should wait for (or never "
            "recorded): the join is fake and the work escapes the timer.",
            KERNELBENCH,
        ),
        Rule(
            "downcast",
            "fp32 work cast to fp16/bf16 or run in TF32 is not the same computation as the fp32 "
            "reference.",
            KERNELBENCH,
        ),
        Rule(
            "input-mutation",
            "forward, its C++ wrapper or a kernel writes into the inputs (zeroing them is a known "
            "exploit).",
            KERNELBENCH,
        ),
        Rule(
            "input-cache",
            "Results kept between calls, keyed on input pointers, identity, shapes or values, "
            "skip the work.",
            STITCHCUDA,
        ),
        Rule(
            "constant-output",
            "The output does not depend on the inputs: constant, never written, or from kernels "
            "that read no input.",
            STITCHCUDA,
        ),
        Rule(
            "kernel-unused",
            "A __global__ kernel is never launched, or its launch is compiled out.",
            STITCHCUDA,
        ),
        Rule(
            "lazy-tensor",
            "A tensor subclass or dispatch mode can compute the output after the timer stopped.",
            KERNELBENCH,
        ),
        Rule("cpu-compute", "The work runs on the CPU (numpy, .cpu(), host loops).", STITCHCUDA),
        Rule(
            "block-size",
            "Threads per block that are not a multiple of the warp size (32) leave lanes idle.",
            CUDA_BEST + "#thread-and-block-heuristics",
        ),
        Rule(
            "launch-unchecked",
            "No error check after a kernel launch: launch failures go unnoticed.",
            "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__ERROR.html",
        ),
    )
}


def rule(rule_id: str) -> Rule:
    return RULES[rule_id]
