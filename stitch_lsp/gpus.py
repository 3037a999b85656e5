"""The one GPU inventory: which GPUs this process may use, how a worker selects one, and which
architecture to build for.

Torch-free and stdlib-only (generated code's runtime reads the architecture from here too), so
counting GPUs never creates a CUDA context. `nvidia-smi` is asked once per process and per
`CUDA_VISIBLE_DEVICES` value; the answer is kept.

- Discovery: `nvidia-smi --query-gpu=index,uuid,name,compute_cap,memory.total` (older drivers
  without `compute_cap`: the same without it, then `nvidia-smi -L`), narrowed and renumbered by
  `CUDA_VISIBLE_DEVICES` the way CUDA does it (indices or UUIDs; CUDA stops at the first entry
  it cannot resolve).
- `cuda:K` is this process's numbering; `physical(device)` is the `CUDA_VISIBLE_DEVICES` entry
  that makes that GPU a worker's `cuda:0`.
- The build architecture has one fallback policy, `build_arch`: `STITCH_CUDA_ARCH`, else the
  device torch already runs in this process, else the GPU's compute capability, else sm_90a
  (H100/H200, what nvcc builds for with no GPU present). Hopper gets the `a` suffix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass

DEFAULT_ARCH = "sm_90a"
_QUERIES = (
    ("index,uuid,name,compute_cap,memory.total", True),
    ("index,uuid,name,memory.total", False),
)
_GPU_LINE = re.compile(r"^GPU (\d+): ([^\n(]*?)\s*(?:\(UUID: ([^)\s]+)\))?[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Gpu:
    device: str
    """`cuda:K` as this process (and its workers) number it."""
    physical: str
    """The CUDA_VISIBLE_DEVICES entry that selects this GPU in a child process."""
    name: str = ""
    uuid: str | None = None
    compute_capability: str | None = None
    """`9.0`; None when the driver does not say."""
    memory_mib: int | None = None

    @property
    def arch(self) -> str | None:
        """`sm_90a` for a 9.0 GPU; None when the compute capability is unknown."""
        try:
            return normalize_arch(self.compute_capability) if self.compute_capability else None
        except ValueError:
            return None


@dataclass(frozen=True)
class Inventory:
    gpus: tuple[Gpu, ...] = ()
    problem: str | None = None
    """Why there is no GPU, in one sentence for the user; None when there is one."""

    def devices(self) -> list[str]:
        return [g.device for g in self.gpus]

    def get(self, device: str) -> Gpu | None:
        return next((g for g in self.gpus if g.device == device), None)

    def physical(self, device: str) -> str:
        """The CUDA_VISIBLE_DEVICES value that gives a worker exactly `device` as its cuda:0."""
        gpu = self.get(device)
        if gpu is not None:
            return gpu.physical
        index = _index(device)
        visible = _visible_entries()
        if visible is not None and 0 <= index < len(visible):
            return visible[index]
        return str(index)


def normalize_arch(value: str) -> str:
    """'9.0' / '90' / '90a' / 'sm_90' / 'sm_90a' -> 'sm_90a' style. Hopper gets the `a` suffix
    (wgmma and TMA need it); other GPUs keep the plain number."""
    v = value.strip().lower()
    v = v.removeprefix("sm_").removeprefix("compute_")
    if "." in v:
        major, minor = v.split(".", 1)
        v = f"{major}{minor}"
    if not re.fullmatch(r"\d{2,3}[af]?", v):
        raise ValueError(f"not a CUDA architecture: {value!r}")
    if v == "90":
        v = "90a"
    return f"sm_{v}"


def build_arch(device: str | None = None) -> str:
    """The architecture to build for, by the one fallback policy (see the module docstring)."""
    env = os.environ.get("STITCH_CUDA_ARCH")
    if env:
        return normalize_arch(env)
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            major, minor = torch.cuda.get_device_capability(torch.cuda.current_device())
            return normalize_arch(f"{major}.{minor}")
    except Exception:  # a broken CUDA context: ask the driver instead
        pass
    inv = inventory()
    gpu = inv.get(device) if device else (inv.gpus[0] if inv.gpus else None)
    return (gpu.arch if gpu is not None else None) or DEFAULT_ARCH


_cache: dict[tuple[str | None, str | None], Inventory] = {}
_lock = threading.Lock()


def inventory(*, refresh: bool = False, timeout_s: float = 20.0) -> Inventory:
    """The GPUs this process may use (cached per CUDA_VISIBLE_DEVICES and nvidia-smi)."""
    smi = shutil.which("nvidia-smi")
    key = (os.environ.get("CUDA_VISIBLE_DEVICES"), smi)
    with _lock:
        if not refresh and key in _cache:
            return _cache[key]
    found = _discover(smi, timeout_s)
    with _lock:
        _cache[key] = found
    return found


def visible_gpus() -> list[str]:
    """`cuda:K` for every GPU this process (and its workers) can use; [] when there is none."""
    return inventory().devices()


def _discover(smi: str | None, timeout_s: float) -> Inventory:
    visible = _visible_entries()
    if visible == []:
        return Inventory(problem="No CUDA GPU visible: CUDA_VISIBLE_DEVICES hides every GPU.")
    if smi is None:
        return Inventory(problem="No CUDA GPU on this machine (nvidia-smi not found).")
    listed = _listed(smi, timeout_s)
    if isinstance(listed, str):
        return Inventory(problem=listed)
    chosen: list[Gpu] = []
    for entry in visible if visible is not None else [g.physical for g in listed]:
        gpu = _resolve(entry, listed)
        if gpu is None:
            break  # CUDA stops at the first entry it cannot resolve
        chosen.append(_renumber(gpu, len(chosen), entry))
    if not chosen:
        return Inventory(
            problem="No CUDA GPU visible (nvidia-smi lists none, or CUDA_VISIBLE_DEVICES names "
            "none of them)."
        )
    return Inventory(tuple(chosen))


def _renumber(gpu: Gpu, k: int, entry: str) -> Gpu:
    return Gpu(f"cuda:{k}", entry, gpu.name, gpu.uuid, gpu.compute_capability, gpu.memory_mib)


def _resolve(entry: str, listed: list[Gpu]) -> Gpu | None:
    for gpu in listed:
        if entry == gpu.physical or (
            gpu.uuid and (entry == gpu.uuid or gpu.uuid.startswith(entry))
        ):
            return gpu
    return None


def _listed(smi: str, timeout_s: float) -> list[Gpu] | str:
    """Every GPU the driver lists (physical numbering), or why nvidia-smi could not say."""
    for fields, has_cc in _QUERIES:
        out, problem = _run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"], timeout_s
        )
        if problem is not None:
            return problem
        gpus = [g for line in (out or "").splitlines() if (g := _csv_gpu(line, has_cc))]
        if gpus:
            return gpus
    out, problem = _run([smi, "-L"], timeout_s)
    if problem is not None:
        return problem
    return [
        Gpu(f"cuda:{i}", idx, name.strip(), uuid or None)
        for i, (idx, name, uuid) in enumerate(_GPU_LINE.findall(out or ""))
    ]


def _run(argv: list[str], timeout_s: float) -> tuple[str | None, str | None]:
    """(stdout, None); (None, None) when a query field is unknown to this driver; or
    (None, a sentence saying why nvidia-smi failed)."""
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"nvidia-smi failed ({exc}), so no GPU can be used."
    if out.returncode == 0:
        return out.stdout, None
    first = (out.stderr or out.stdout).strip().splitlines()[:1]
    if argv[1].startswith("--query-gpu") and "field" in " ".join(first).lower():
        return None, None  # an older driver without this field: try the next query
    why = first[0] if first else f"exit code {out.returncode}"
    return None, f"No CUDA GPU usable: nvidia-smi failed ({why})."


def _csv_gpu(line: str, has_cc: bool) -> Gpu | None:
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != (5 if has_cc else 4) or not parts[0].isdigit():
        return None
    cc = parts[3] if has_cc and re.fullmatch(r"\d+\.\d+", parts[3]) else None
    mem = parts[-1]
    return Gpu(
        f"cuda:{parts[0]}",
        parts[0],
        parts[2],
        parts[1] or None,
        cc,
        int(float(mem)) if re.fullmatch(r"\d+(\.\d+)?", mem) else None,
    )


def _visible_entries() -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as a list; None when unset, [] when it hides every GPU."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    if visible.strip() in {"", "-1"}:
        return []
    return [v.strip() for v in visible.split(",") if v.strip()]


def _index(device: str) -> int:
    try:
        return int(device.split(":", 1)[1]) if ":" in device else int(device)
    except ValueError:
        return 0
