"""The adversarial suite: hostile and honest candidates, each paired with a reference in refs/,
listed in manifest.json with the kind of trick, its disguise and what should catch it:

- `static`: `stitch-lsp check` flags it at warning or above, on a line marked `HOSTILE`;
- `dynamic`: only running it can tell; the Verifier must end with `exploit` or `incorrect`;
- `both`: flagged statically, and the Verifier also stops it when the static checks are skipped;
- `honest`: no warning or error from `check`, and the Verifier passes it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

SUITE = Path(__file__).resolve().parent
MARKER = "HOSTILE"


@dataclass(frozen=True)
class Case:
    file: str
    reference: str
    kind: str
    disguise: str
    expect: str  # static | dynamic | both | honest
    codes: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return SUITE / self.file

    @property
    def reference_path(self) -> Path:
        return SUITE / self.reference

    @property
    def name(self) -> str:
        return Path(self.file).stem

    @property
    def hostile(self) -> bool:
        return self.expect != "honest"

    def marked_lines(self) -> set[int]:
        """1-based lines carrying the HOSTILE marker (in Python or in the CUDA strings)."""
        lines = self.path.read_text().splitlines()
        return {i for i, line in enumerate(lines, 1) if MARKER in line}


@cache
def cases() -> tuple[Case, ...]:
    data = json.loads((SUITE / "manifest.json").read_text())
    return tuple(
        Case(
            file=c["file"],
            reference=c["reference"],
            kind=c["kind"],
            disguise=c["disguise"],
            expect=c["expect"],
            codes=tuple(c.get("codes", ())),
        )
        for c in data["cases"]
    )


def select(*expects: str) -> list[Case]:
    return [c for c in cases() if c.expect in expects]
