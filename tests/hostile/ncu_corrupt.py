"""Damaged copies of a real Nsight Compute report: truncated at many points, with bytes
flipped, zeroed or shuffled. Deterministic (a fixed seed), so a failure names its variant."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path


def variants(data: bytes, seed: int = 17) -> Iterator[tuple[str, bytes]]:
    """(name, bytes) of about forty damaged versions of `data`."""
    rng = random.Random(seed)
    n = len(data)
    yield "empty", b""
    yield "one-byte", data[:1]
    for frac in (0.01, 0.05, 0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9, 0.99):
        yield f"truncated-{int(frac * 100)}pct", data[: int(n * frac)]
    yield "truncated-last-byte", data[:-1]
    yield "truncated-last-16", data[:-16]
    for k in (4, 16, 64, 256):
        yield f"header-zeroed-{k}", bytes(k) + data[k:]
    for i in range(8):
        at = rng.randrange(n)
        yield f"flip-byte-{i}", data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :]
    for i in range(6):
        at = rng.randrange(n - 512)
        yield f"zeroed-512-{i}", data[:at] + bytes(512) + data[at + 512 :]
    for i in range(3):
        at = rng.randrange(n)
        yield f"random-tail-{i}", data[:at] + rng.randbytes(n - at)
    yield "halves-swapped", data[n // 2 :] + data[: n // 2]
    yield "random-bytes", rng.randbytes(n)
    yield "doubled", data + data


def write_variants(source: Path, folder: Path) -> list[Path]:
    """Write every variant of `source` into `folder` as `<name>.ncu-rep`."""
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, blob in variants(source.read_bytes()):
        path = folder / f"{name}.ncu-rep"
        path.write_bytes(blob)
        out.append(path)
    return out
