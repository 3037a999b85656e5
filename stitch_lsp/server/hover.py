"""Static hover text for kernels, launches and nn.Modules: what the code says, before any run.

Profile and verify results add their own sections through other hover providers.
"""

from __future__ import annotations

from stitch_lsp.analysis.model import Analysis, KernelInfo, LaunchInfo, ModuleInfo, range_contains

Target = KernelInfo | LaunchInfo | ModuleInfo


def target_at(analysis: Analysis, line: int, char: int) -> Target | None:
    """The launch, kernel or module whose name is under the cursor (innermost first)."""
    for launch in analysis.launches:
        if range_contains(launch.name_range, line, char):
            return launch
    for kernel in analysis.kernels:
        if range_contains(kernel.selection_range, line, char):
            return kernel
    for module in analysis.modules:
        if range_contains(module.selection_range, line, char):
            return module
    return None


def hover_markdown(analysis: Analysis, line: int, char: int) -> str | None:
    target = target_at(analysis, line, char)
    if isinstance(target, LaunchInfo):
        kernel = next((k for k in analysis.kernels if k.name == target.kernel), None)
        parts = [_launch_md(target)]
        if kernel is not None:
            parts.append(_kernel_md(analysis, kernel, with_launches=False))
        return "\n\n".join(parts)
    if isinstance(target, KernelInfo):
        return _kernel_md(analysis, target)
    if isinstance(target, ModuleInfo):
        return _module_md(analysis, target)
    return None


def _kernel_md(analysis: Analysis, k: KernelInfo, *, with_launches: bool = True) -> str:
    what = "CUDA kernel" if k.kind == "kernel" else "device function"
    qualifiers = [q for q, on in (('extern "C"', k.extern_c), ("template", k.template)) if on]
    lines = [f"**`{k.name}`** · {what}" + (f" ({', '.join(qualifiers)})" if qualifiers else "")]
    carrier = _carrier(analysis, k.embedded_index)
    if carrier:
        lines.append(carrier)
    lines.append(f"```cuda\n{k.signature.strip()}\n```")
    if k.params:
        lines.append("Parameters: " + ", ".join(f"`{p}`" for p in k.params))
    if k.kind == "kernel" and with_launches:
        launches = [x for x in analysis.launches if x.kernel == k.name]
        if launches:
            lines.append(f"Launch sites ({len(launches)}):")
            lines.extend(f"- {_launch_line(x)}" for x in launches)
        else:
            lines.append("Launch sites: none found in this file.")
    facts = []
    if k.shared_memory:
        facts.append("shared memory: " + "; ".join(f"`{s}`" for s in k.shared_memory))
    if k.syncthreads:
        facts.append(f"`__syncthreads()` ×{k.syncthreads}")
    if k.library_calls:
        facts.append("library calls: " + ", ".join(f"`{c}`" for c in k.library_calls))
    if facts:
        lines.append("; ".join(facts))
    return "\n\n".join(lines)


def _launch_md(x: LaunchInfo) -> str:
    return f"**launch of `{x.kernel}`**\n\n{_launch_line(x)}"


def _launch_line(x: LaunchInfo) -> str:
    config = [x.grid, x.block] + [c for c in (x.shared_mem, x.stream) if c is not None]
    text = f"line {x.range[0] + 1}: `<<<{', '.join(config)}>>>` grid `{x.grid}`, block `{x.block}`"
    if x.shared_mem is not None:
        text += f", dynamic shared memory `{x.shared_mem}`"
    if x.stream is not None:
        text += f", stream `{x.stream}`"
    if not x.error_checked:
        text += " · no launch error check follows"
    return text


def _carrier(analysis: Analysis, embedded_index: int | None) -> str | None:
    """Which Python string (and which load_inline call) holds this CUDA."""
    if embedded_index is None or not 0 <= embedded_index < len(analysis.embedded):
        return None
    emb = analysis.embedded[embedded_index]
    where = f"in the CUDA string `{emb.name}`" if emb.name else "in a CUDA string"
    if emb.call_index is not None and 0 <= emb.call_index < len(analysis.load_inline_calls):
        call = analysis.load_inline_calls[emb.call_index]
        label = f"`{call.function}`"
        if call.name:
            label += f" (name `{call.name}`)"
        where += f", built by {label} on line {call.range[0] + 1}"
        if call.target:
            where += f" into `{call.target}`"
    return "*" + where + "*"


def _module_md(analysis: Analysis, m: ModuleInfo) -> str:
    bases = ", ".join(m.bases) or "nn.Module"
    role = ""
    if m.name == "ModelNew" or (analysis.reference_header and m.name != "Model"):
        role = " · candidate"
    elif m.name == "Model":
        role = " · reference"
    lines = [f"**class `{m.name}`**({bases}){role}"]
    sigs = []
    if m.init_params is not None:
        sigs.append(f"- `__init__({', '.join(m.init_params)})`")
    if m.forward_params is not None:
        sigs.append(f"- `forward({', '.join(m.forward_params)})`")
    else:
        sigs.append("- no `forward` defined")
    lines.append("\n".join(sigs))
    if analysis.reference_header and m.name != "Model":
        lines.append(f"Reference: `{analysis.reference_header}`")
    elif m.name == "ModelNew" and analysis.module("Model") is not None:
        lines.append("Reference: `Model` in this file")
    inputs = []
    if analysis.get_inputs is not None:
        inputs.append(f"`get_inputs` (line {analysis.get_inputs.range[0] + 1})")
    if analysis.get_init_inputs is not None:
        inputs.append(f"`get_init_inputs` (line {analysis.get_init_inputs.range[0] + 1})")
    if inputs:
        lines.append("Inputs: " + ", ".join(inputs))
    if analysis.load_inline_calls:
        calls = []
        for i, call in enumerate(analysis.load_inline_calls):
            kernels = [
                k.name
                for k in analysis.kernels
                if k.kind == "kernel"
                and k.embedded_index is not None
                and analysis.embedded[k.embedded_index].call_index == i
            ]
            label = f"`{call.function}`" + (f" `{call.name}`" if call.name else "")
            detail = f" — kernels: {', '.join(f'`{k}`' for k in kernels)}" if kernels else ""
            calls.append(f"- {label} (line {call.range[0] + 1}){detail}")
        lines.append("CUDA built in this file:\n" + "\n".join(calls))
    return "\n\n".join(lines)
