"""Function-like C preprocessor macros, expanded as far as a reader needs. Pure Python.

`##` pastes tokens together, so `CAT(cublasS, gemm)(...)` calls `cublasSgemm` without the name
appearing anywhere, and `DEFINE_ACT(relu)` can define a `__global__ void relu_kernel`. The
static checks need the first (a CUDA API name hidden from them) and attribution the second (the
kernel names a candidate defines). This follows the preprocessor closely enough for both:
arguments next to `#`/`##` are taken as written, others are expanded first, and the result is
scanned again for further macros. It is not a preprocessor (no `#if`, no variadic `__VA_OPT__`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_DEFINE = re.compile(
    r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\([^)]*\))?[ \t]*((?:[^\n]*\\\n)*[^\n]*)",
    re.MULTILINE,
)
_IDENT = re.compile(r"[A-Za-z_]\w*")
_PASTE = re.compile(r"\s*##\s*")
MAX_DEPTH = 8


@dataclass(frozen=True)
class Macro:
    name: str
    params: tuple[str, ...] | None  # None: an object-like macro
    body: str

    @property
    def pastes(self) -> bool:
        return "##" in self.body


@dataclass(frozen=True)
class Invocation:
    start: int  # offsets of `NAME(...)` in the source text
    end: int
    macro: str
    expansion: str
    pasted: tuple[str, ...]  # identifiers the expansion made that the source never spells


def macros(text: str) -> dict[str, Macro]:
    """The `#define`s of a text (the last definition of a name wins)."""
    found: dict[str, Macro] = {}
    for m in _DEFINE.finditer(text):
        params = None
        if m.group(2) is not None:
            params = tuple(p.strip() for p in m.group(2)[1:-1].split(",") if p.strip())
        body = re.sub(r"\\\n", " ", m.group(3))
        body = re.sub(r"//.*$|/\*.*?\*/", "", body).strip()
        found[m.group(1)] = Macro(m.group(1), params, body)
    return found


def _arguments(text: str, open_at: int) -> tuple[list[str], int] | None:
    """The comma-separated arguments of the parenthesis at `open_at`, and the offset after its
    closing parenthesis."""
    depth, args, start = 0, [], open_at + 1
    for i in range(open_at, min(len(text), open_at + 4000)):
        c = text[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(text[start:i].strip())
                return args, i + 1
        elif c == "," and depth == 1:
            args.append(text[start:i].strip())
            start = i + 1
    return None


def _substitute(macro: Macro, args: list[str], table: dict[str, Macro], depth: int) -> str:
    """The body with its parameters replaced: as written next to `#`/`##`, expanded elsewhere."""
    params = macro.params or ()
    values = dict(zip(params, args, strict=False))
    if params and params[-1] == "..." and len(args) >= len(params):
        values["__VA_ARGS__"] = ", ".join(args[len(params) - 1 :])
    out: list[str] = []
    pos = 0
    body = macro.body
    for m in _IDENT.finditer(body):
        out.append(body[pos : m.start()])
        pos = m.end()
        word = m.group(0)
        if word not in values:
            out.append(word)
            continue
        before = body[: m.start()].rstrip()
        after = body[m.end() :].lstrip()
        raw = before.endswith("#") or after.startswith("##")
        out.append(values[word] if raw else expand_text(values[word], table, depth + 1))
    out.append(body[pos:])
    return _PASTE.sub("", "".join(out))


def expand_text(text: str, table: dict[str, Macro], depth: int = 0) -> str:
    """`text` with every macro in it expanded (a few levels deep)."""
    if depth > MAX_DEPTH or not table:
        return text
    out: list[str] = []
    pos = 0
    for m in _IDENT.finditer(text):
        if m.start() < pos:
            continue
        macro = table.get(m.group(0))
        if macro is None:
            continue
        if macro.params is None:
            out.append(text[pos : m.start()])
            out.append(expand_text(macro.body, table, depth + 1))
            pos = m.end()
            continue
        after = m.end()
        while after < len(text) and text[after] in " \t":
            after += 1
        if after >= len(text) or text[after] != "(":
            continue
        parsed = _arguments(text, after)
        if parsed is None:
            continue
        args, end = parsed
        out.append(text[pos : m.start()])
        out.append(expand_text(_substitute(macro, args, table, depth), table, depth + 1))
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _pastes(name: str, table: dict[str, Macro], depth: int = 0) -> bool:
    """Whether a macro pastes tokens, itself or through a macro its body names."""
    macro = table.get(name)
    if macro is None or depth > MAX_DEPTH:
        return False
    if macro.pastes:
        return True
    return any(_pastes(w, table, depth + 1) for w in _IDENT.findall(macro.body) if w != name)


def invocations(text: str) -> list[Invocation]:
    """Each use, outside `#define` lines, of a function-like macro that pastes tokens, with
    its expansion and the identifiers the pasting made."""
    table = macros(text)
    pasting = {n for n, m in table.items() if m.params is not None and _pastes(n, table)}
    if not pasting:
        return []
    spelled = set(_IDENT.findall(text))
    defines = [(m.start(), m.end()) for m in _DEFINE.finditer(text)]
    found: list[Invocation] = []
    for m in _IDENT.finditer(text):
        if m.group(0) not in pasting or any(a <= m.start() < b for a, b in defines):
            continue
        after = m.end()
        while after < len(text) and text[after] in " \t":
            after += 1
        if after >= len(text) or text[after] != "(":
            continue
        parsed = _arguments(text, after)
        if parsed is None:
            continue
        _, end = parsed
        expansion = expand_text(text[m.start() : end], table)
        made = tuple(dict.fromkeys(w for w in _IDENT.findall(expansion) if w not in spelled))
        found.append(Invocation(m.start(), end, m.group(0), expansion, made))
    return found


def expansions(text: str) -> list[str]:
    """The expansions of every pasting macro's uses (for the names they define)."""
    return [inv.expansion for inv in invocations(text)]
