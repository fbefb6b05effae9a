"""Tables and lines for a terminal: sized to its width, verdicts in colour.

Only :mod:`contrib.ui` calls this, and only when stdout is a terminal.  The
columns keep their natural width while the table fits.  When it does not, the
free-text columns (a verdict, a reason, an error: those named in ``wrap``, by
default the last) give way first and wrap inside their column, under their
row; then the identifying columns (a patchset, a file:line) are cut with an
ellipsis, the widest first.  No line is wider than the terminal.  ``--json``
keeps every cell whole.

rich's Table was tried first and left out: as configured (identifiers
``no_wrap`` with an ellipsis, free text folding), status's nine columns at 80
came out with the free-text column whole and the right-hand columns cut off;
and importing rich.console, rich.table and rich.text took 290-490 ms on the
project's shared 2-core machine against 34-63 ms for this module.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable, Sequence

# Words that say how something went, coloured wherever a table or a result line
# shows them: green went well, red needs a person, yellow is not proven yet.
_GREEN, _RED, _YELLOW, _DIM, _BOLD, _RESET = (f"\x1b[{n}m" for n in (32, 31, 33, 2, 1, 0))
_STYLES = (
    (re.compile(r"\b(?:passed|PASSED|unchanged|rebased|upstreamed|gate-only|ok|merged)\b"),
     _GREEN),
    (re.compile(r"\b(?:failed|FAILED|conflict|error|unreachable|needs-kernel-work)\b"), _RED),
    (re.compile(r"\b(?:incomplete|INCOMPLETE|not validated|skipped|partially-upstreamed|"
                r"not-buildable|unknown)\b"), _YELLOW),
    (re.compile(r"\bintentional\b"), _DIM),
)
# A word on its own: "gate-only" is a class, "minifer/sm120-gate-only" a patchset.
_STYLED = re.compile("|".join(f"(?<![\\w/-])(?P<s{n}>{p.pattern})(?![\\w/-])"
                              for n, (p, _) in enumerate(_STYLES)))
_GAP = 2  # spaces between columns, as the plain table has
_MIN_WRAP = 16  # a wrapping column narrower than this reads as a list of fragments
_ELLIPSIS = "…"


def paint(text: str) -> str:
    """``text`` with its verdict words coloured (the caller decided colour is wanted)."""
    def one(match: re.Match[str]) -> str:
        style = _STYLES[int(str(match.lastgroup)[1:])][1]
        return f"{style}{match.group(0)}{_RESET}"

    return _STYLED.sub(one, text)


def widths_for(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int,
               shrinking: Sequence[bool]) -> list[int]:
    """Each column's width so that the table is at most ``width`` wide: the columns
    marked in ``shrinking`` give way to ``_MIN_WRAP`` first, then the others to six
    characters, widest first, the first column (what the row is) last of all."""
    natural = [max([len(name), *(len(row[n]) for row in rows if n < len(row))])
               for n, name in enumerate(columns)]
    widths = list(natural)
    budget = width - _GAP * (len(columns) - 1)
    wraps = [n for n, flag in enumerate(shrinking) if flag]
    others = [n for n, flag in enumerate(shrinking) if not flag and n]
    _shrink(widths, budget, wraps, lambda n: min(natural[n], max(len(columns[n]), _MIN_WRAP)))
    for floor in (6, 3):
        def floor_of(n: int, f: int = floor) -> int:
            return min(natural[n], f)

        _shrink(widths, budget, others, floor_of)
        _shrink(widths, budget, [0], floor_of)
    return widths


def _shrink(widths: list[int], budget: int, which: list[int],
            floor_of: Callable[[int], int]) -> None:
    """Take one column at a time off the widest of ``which`` until the table fits."""
    while sum(widths) > budget:
        able = [n for n in which if widths[n] > floor_of(n)]
        if not able:
            return
        widest = max(able, key=lambda n: widths[n])
        widths[widest] -= 1


def render_table(columns: Sequence[str], rows: Sequence[Sequence[str]], *, width: int,
                 colour: bool, wrap: Sequence[str] = ()) -> str:
    """The table as text no wider than ``width``, header bold and verdicts coloured
    when ``colour``.  The columns named in ``wrap`` (default: the last) wrap in
    their column while it keeps ``_MIN_WRAP`` characters and the other columns
    their whole width, else they move under their row (``name: text; name: text``,
    wrapped) and the others are cut to fit."""
    rows = [[*row, *[""] * (len(columns) - len(row))] for row in rows]
    wrapping = [name in (set(wrap) or {columns[-1]}) for name in columns]
    widths = widths_for(columns, rows, width, wrapping)
    natural = widths_for(columns, rows, 1 << 30, wrapping)
    inline = sum(widths) + _GAP * (len(columns) - 1) <= width and all(
        widths[n] == natural[n] for n, flag in enumerate(wrapping) if not flag)
    if not inline:
        kept = [n for n, flag in enumerate(wrapping) if not flag]
        under = [n for n, flag in enumerate(wrapping) if flag]
        shown = [columns[n] for n in kept]
        widths = widths_for(shown, [[row[n] for n in kept] for row in rows], width,
                            [False] * len(kept))
    else:
        kept, under, shown = list(range(len(columns))), [], list(columns)
    out = [_line([_cut(name, w) for name, w in zip(shown, widths, strict=True)], widths,
                 _BOLD if colour else "")]
    for row in rows:
        parts = [textwrap.wrap(row[n], w, break_on_hyphens=False) or [""]
                 if wrapping[n] else [_cut(row[n], w)]
                 for n, w in zip(kept, widths, strict=True)]
        for depth in range(max(len(p) for p in parts)):
            line = [p[depth] if depth < len(p) else "" for p in parts]
            out.append(_line(line, widths, "", paint_cells=colour))
        below = "; ".join(f"{columns[n]}: {row[n]}" for n in under if row[n] not in ("", "-"))
        if below:
            out += render_line(f"    {below}", width=width, colour=colour).split("\n")
    return "\n".join(line if len(_plain(line)) <= width else line[:width] for line in out)


def _line(cells: list[str], widths: list[int], style: str, *, paint_cells: bool = False) -> str:
    padded = "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()
    if paint_cells:
        padded = paint(padded)
    return f"{style}{padded}{_RESET}" if style and padded else padded


def _cut(cell: str, width: int) -> str:
    """``cell`` in ``width``: a path loses its start (``…/modules.py:120`` keeps the file
    and line), anything else its end."""
    if len(cell) <= width:
        return cell
    if "/" in cell and width > 1:
        return _ELLIPSIS + cell[len(cell) - width + 1:]
    return cell[:max(width - 1, 0)] + _ELLIPSIS


def render_line(line: str, *, width: int, colour: bool) -> str:
    """One line of a result, wrapped to ``width`` (continuations indented under it)."""
    if len(line) <= width:
        return paint(line) if colour else line
    indent = " " * min(len(line) - len(line.lstrip(" ")) + 2, width // 2)
    parts = textwrap.wrap(line, width=width, subsequent_indent=indent, break_on_hyphens=False,
                          drop_whitespace=True) or [line]
    text = "\n".join(parts)
    return paint(text) if colour else text


_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def _plain(line: str) -> str:
    return _ESCAPE.sub("", line)
