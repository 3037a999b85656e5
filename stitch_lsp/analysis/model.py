"""What `analyze()` returns. Plain dataclasses: they stay inside the server process.

All ranges are 0-based `(start_line, start_char, end_line, end_char)` in the document's
coordinates, characters in UTF-16 code units as LSP counts them, including for code that sits
inside a CUDA string of a Python file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from stitch_lsp.analysis.embedded import EmbeddedCuda
from stitch_lsp.models.findings import Finding

Range = tuple[int, int, int, int]
SymbolKind = Literal["module", "method", "function", "kernel", "device_function", "launch"]


def range_contains(rng: Range, line: int, char: int) -> bool:
    return (rng[0], rng[1]) <= (line, char) <= (rng[2], rng[3])


@dataclass(slots=True)
class Symbol:
    """One entry of the document outline."""

    name: str
    kind: SymbolKind
    range: Range
    selection_range: Range
    detail: str = ""
    children: list[Symbol] = field(default_factory=list)


@dataclass(slots=True)
class FunctionInfo:
    """A Python function or method: its name, parameter names and where it is."""

    name: str
    params: list[str]
    range: Range
    selection_range: Range


@dataclass(slots=True)
class ModuleInfo:
    """An `nn.Module` subclass."""

    name: str
    bases: list[str]
    range: Range
    selection_range: Range
    init_params: list[str] | None  # None when the class defines no __init__
    forward_params: list[str] | None  # None when the class defines no forward
    methods: list[FunctionInfo] = field(default_factory=list)

    def method(self, name: str) -> FunctionInfo | None:
        return next((m for m in self.methods if m.name == name), None)


@dataclass(slots=True)
class LaunchInfo:
    """A `kernel<<<grid, block, smem, stream>>>(args)` launch."""

    kernel: str
    grid: str
    block: str
    shared_mem: str | None
    stream: str | None
    args: list[str]
    range: Range
    name_range: Range
    error_checked: bool
    embedded_index: int | None = None  # index into Analysis.embedded, None in a .cu file


@dataclass(slots=True)
class KernelInfo:
    """A `__global__` kernel or a `__device__` function."""

    name: str
    kind: Literal["kernel", "device_function"]
    params: list[str]
    signature: str
    range: Range
    selection_range: Range
    extern_c: bool = False
    template: bool = False
    shared_memory: list[str] = field(default_factory=list)  # `__shared__` declarations
    syncthreads: int = 0
    library_calls: list[str] = field(default_factory=list)  # cublas*/cudnn* called inside
    launch_sites: list[Range] = field(default_factory=list)
    embedded_index: int | None = None


@dataclass(slots=True)
class LoadInlineCall:
    """A call that builds CUDA at run time: load_inline, cpp_extension.load, or load_cuda."""

    function: str  # the callee as written, e.g. "torch.utils.cpp_extension.load_inline"
    kind: Literal["load_inline", "load", "load_cuda"]
    range: Range
    target: str | None  # what the result is assigned to ("ext", "self.ext")
    name: str | None  # the `name=` argument when it is a literal
    functions: list[str]  # the `functions=` argument when literal
    sources: list[str]  # `sources=` file names of cpp_extension.load
    embedded: list[int] = field(default_factory=list)  # indexes into Analysis.embedded
    declined: list[str] = field(default_factory=list)  # why an argument could not be read


@dataclass(slots=True)
class Outline:
    """The parts of an Analysis that only the outline, hovers and lenses need."""

    symbols: list[Symbol] = field(default_factory=list)
    modules: list[ModuleInfo] = field(default_factory=list)
    functions: list[FunctionInfo] = field(default_factory=list)  # module-level Python functions
    kernels: list[KernelInfo] = field(default_factory=list)
    launches: list[LaunchInfo] = field(default_factory=list)
    get_inputs: FunctionInfo | None = None
    get_init_inputs: FunctionInfo | None = None


@dataclass
class Analysis:
    """Everything the editor needs from one version of one document.

    Diagnostics, CUDA strings and load calls are computed at once; the outline (symbols,
    modules, functions, kernels, launches, get_inputs) on first access, so a keystroke in a
    large file pays only for the diagnostics. The outline stays correct for its own version
    even after the document has moved on.
    """

    uri: str
    language: Literal["python", "cuda", "other"]
    version: int
    diagnostics: list[Finding] = field(default_factory=list)
    embedded: list[EmbeddedCuda] = field(default_factory=list)
    load_inline_calls: list[LoadInlineCall] = field(default_factory=list)
    reference_header: str | None = None  # the path in `# stitch-lsp: reference=...`
    defines_model_new: bool = False
    skipped: str | None = None  # why deep analysis was skipped (file too large, ...)
    outline_builder: Callable[[], Outline] | None = field(default=None, repr=False)
    _outline: Outline | None = field(default=None, repr=False)

    @property
    def outline(self) -> Outline:
        if self._outline is None:
            builder, self.outline_builder = self.outline_builder, None
            self._outline = builder() if builder is not None else Outline()
        return self._outline

    @property
    def symbols(self) -> list[Symbol]:
        return self.outline.symbols

    @property
    def modules(self) -> list[ModuleInfo]:
        return self.outline.modules

    @property
    def functions(self) -> list[FunctionInfo]:
        return self.outline.functions

    @property
    def kernels(self) -> list[KernelInfo]:
        return self.outline.kernels

    @property
    def launches(self) -> list[LaunchInfo]:
        return self.outline.launches

    @property
    def get_inputs(self) -> FunctionInfo | None:
        return self.outline.get_inputs

    @property
    def get_init_inputs(self) -> FunctionInfo | None:
        return self.outline.get_init_inputs

    @property
    def is_candidate(self) -> bool:
        """A solution file: it defines ModelNew or names its reference in a header."""
        return self.reference_header is not None or self.defines_model_new

    def module(self, name: str) -> ModuleInfo | None:
        return next((m for m in self.modules if m.name == name), None)

    def embedded_at(self, line: int, char: int) -> EmbeddedCuda | None:
        """The CUDA string under a document position, if any."""
        return next((e for e in self.embedded if e.contains(line, char)), None)
