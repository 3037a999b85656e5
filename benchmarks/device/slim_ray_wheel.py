"""Write a copy of a Ray wheel without the parts a Python-only local head never loads.

Why: the GPU machine is reached with at most 64 MiB of carried files, and Ray's wheel is about
76 MiB. Its Java worker jar (`ray/jars/`, about 30 MiB compressed) is used only by Java
workers. The copy keeps every other file byte for byte (with its permissions) and a RECORD
without the dropped entries, so pip installs it as usual.

Usage: python benchmarks/device/slim_ray_wheel.py RAY.whl OUT_FOLDER
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

DROP = ("ray/jars/",)


def slim(wheel: Path, out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / wheel.name
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(target, "w") as dst:
        for info in src.infolist():
            if info.filename.startswith(DROP):
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                kept = [ln for ln in lines if not ln.startswith(DROP)]
                data = ("\n".join(kept) + "\n").encode()
            dst.writestr(info, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    return target


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    out = slim(Path(sys.argv[1]), Path(sys.argv[2]))
    print(f"{out}: {out.stat().st_size / 2**20:.1f} MiB")
