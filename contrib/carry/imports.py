"""A Python module's top-level imports as one place: the names it imports, not its lines.

Upstream regroups imports at will: isort moves them, a formatter reflows
``from sglang.srt.model_loader.loader import DefaultModelLoader, ModelOptModelLoader``
into a parenthesised block once a third name joins, and a landing adds
``Fp8LinearMethod`` to the ``Fp8Config`` line the patch wrote.  Line by line
nothing of such a hunk stands; name by name all of it does.  So a hunk that
changes only import statements at module level is placed in its file's import
block, and its lines are the imports it adds and removes, each written
``from MODULE import NAME`` (``import MODULE``), to be found among the file's
top-level imports at the target however they are grouped.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

from contrib.carry.series import Hunk

__all__ = ["IMPORTS", "block_change", "imports"]

IMPORTS = "<imports>"  # the name of a file's import block as a place

_FROM = re.compile(r"from\s+([\w.]+)\s+import\s+(.*)")
_IMPORT = re.compile(r"import\s+(.+)")


def imports(lines: Sequence[str], inside: str | None = None) -> tuple[list[str], list[bool]]:
    """The top-level imports of ``lines`` (``from M import N`` / ``import M``, one per
    name) and, per line, whether it belongs to one; ``inside``: the module of a
    parenthesised ``from M import (`` that ``lines`` start within."""
    found: list[str] = []
    marks: list[bool] = []
    module = inside
    for raw in lines:
        code = raw.split("#", 1)[0].strip()
        if module is not None:  # a line of a parenthesised from-import
            found += [f"from {module} import {n}" for n in _names(code)]
            marks.append(True)
            if ")" in code:
                module = None
            continue
        top = not raw[:1].isspace()
        match = _FROM.fullmatch(code) if top else None
        if match:
            found += [f"from {match[1]} import {n}" for n in _names(match[2])]
            if "(" in match[2] and ")" not in match[2]:
                module = match[1]
            marks.append(True)
            continue
        match = _IMPORT.fullmatch(code) if top else None
        if match:
            found += [f"import {n}" for n in _names(match[1])]
        marks.append(bool(match))
    return found, marks


def block_change(hunk: Hunk, before: Sequence[str]) -> tuple[list[str], list[str]] | None:
    """The imports ``hunk`` adds and removes, when every line it changes is a top-level
    import statement (``before``: the file's lines above it, for a parenthesised
    import it starts within); None otherwise."""
    if not hunk.body:
        return None
    inside = _opened(before)
    sides, changed = [], []
    for drop in ("+", "-"):  # the hunk's source side, then its target side
        kept = [line for line in hunk.body if line[:1] != drop]
        names, marks = imports([line[1:] for line in kept], inside)
        changed += [m for line, m in zip(kept, marks, strict=True)
                    if line[:1] != " " and line[1:].strip()]
        sides.append(Counter(names))
    if not changed or not all(changed):
        return None
    source, after = sides
    return list((after - source).elements()), list((source - after).elements())


def _opened(before: Sequence[str]) -> str | None:
    """The module of the parenthesised from-import still open after ``before``."""
    for raw in reversed(before):
        code = raw.split("#", 1)[0].strip()
        if not code:
            continue
        if raw[:1].isspace() and ")" not in code:
            continue  # a name inside a parenthesised import, maybe
        match = _FROM.fullmatch(code) if not raw[:1].isspace() else None
        return match[1] if match and "(" in match[2] and ")" not in match[2] else None
    return None


def _names(text: str) -> list[str]:
    """The names of an import list, ``a as b`` kept whole."""
    text = text.replace("(", " ").replace(")", " ").replace("\\", " ")
    return [" ".join(n.split()) for n in text.split(",") if n.strip()]
