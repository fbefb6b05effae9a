"""Tables and lines for a terminal: sized to its width, verdicts in colour.

Only :mod:`contrib.ui` calls this, and only when stdout is a terminal.  The
columns keep their natural width while the table fits.  When it does not, the
free-text columns (a verdict, a reason, an error: those named in ``wrap``, by
default the last) give way first and wrap inside their column, then move under
their row; then the other columns follow them there, the rightmost first.  A
key column (what a user types back: a patchset, a gate's FILE:LINE) is never
cut, and no text is broken inside a word: a path, an identifier or a command
copies and pastes whole.  A key wider than the terminal that lists choices
(``--kv-cache-dtype=auto|bf16|...``) breaks after a ``|``, its continuation
indented, since what a user types back is one of its choices, not the list.

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


def paint(text: str) -> str:
    """``text`` with its verdict words coloured (the caller decided colour is wanted)."""
    def one(match: re.Match[str]) -> str:
        style = _STYLES[int(str(match.lastgroup)[1:])][1]
        return f"{style}{match.group(0)}{_RESET}"

    return _STYLED.sub(one, text)


def widths_for(columns: Sequence[str], rows: Sequence[Sequence[str]], width: int,
               shrinking: Sequence[bool]) -> list[int]:
    """Each column's width so that the table is at most ``width`` wide where it can be:
    only the columns marked in ``shrinking`` (free text, which wraps) give way, to
    ``_MIN_WRAP`` or their longest word, widest first; the others keep their width."""
    natural = [max([len(name), *(len(row[n]) for row in rows if n < len(row))])
               for n, name in enumerate(columns)]
    widths = list(natural)
    budget = width - _GAP * (len(columns) - 1)
    wraps = [n for n, flag in enumerate(shrinking) if flag]
    # a column wraps at spaces only: it is never narrower than its longest word
    words = [max([0, *(len(w) for row in rows if n < len(row) for w in row[n].split())])
             for n in range(len(columns))]
    _shrink(widths, budget, wraps,
            lambda n: min(natural[n], max(len(columns[n]), _MIN_WRAP, words[n])))
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
                 colour: bool, wrap: Sequence[str] = (), keys: Sequence[str] = ()) -> str:
    """The table as text no wider than ``width``, header bold and verdicts coloured
    when ``colour``.  The columns named in ``wrap`` (default: the last) wrap in
    their column while it keeps ``_MIN_WRAP`` characters and the others their whole
    width; else they move under their row (``name: text; name: text``, wrapped at
    word boundaries), and so do the other columns, the rightmost first, until the
    row fits.  The ``keys`` (default: the first column), what a user types back
    (a patchset, a gate's FILE:LINE), are never cut nor moved."""
    rows = [[*row, *[""] * (len(columns) - len(row))] for row in rows]
    wrapping = [name in (set(wrap) or {columns[-1]}) for name in columns]
    key = set(keys) or {columns[0]}
    widths = widths_for(columns, rows, width, wrapping)
    if sum(widths) + _GAP * (len(columns) - 1) <= width:
        kept, under = list(range(len(columns))), []
    else:
        kept = [n for n, flag in enumerate(wrapping) if not flag]
        natural = widths_for(columns, rows, 1 << 30, wrapping)
        while sum(natural[n] for n in kept) + _GAP * (len(kept) - 1) > width:
            movable = [n for n in kept if columns[n] not in key]
            if not movable:
                break
            kept.remove(movable[-1])
        under = [n for n in range(len(columns)) if n not in kept]
        widths = [min(natural[n], width) if columns[n] in key else natural[n] for n in kept]
    out = [_line([columns[n] for n in kept], widths, _BOLD if colour else "")]
    for row in rows:
        parts = [textwrap.wrap(row[n], w, break_on_hyphens=False, break_long_words=False)
                 or [""] if wrapping[n] else
                 choices(row[n], w) if columns[n] in key else [row[n]]
                 for n, w in zip(kept, widths, strict=True)]
        for depth in range(max(len(p) for p in parts)):
            line = [p[depth] if depth < len(p) else "" for p in parts]
            out.append(_line(line, widths, "", paint_cells=colour))
        below = "; ".join(f"{columns[n]}: {row[n]}" for n in under if row[n] not in ("", "-"))
        if below:
            out += render_line(f"    {below}", width=width, colour=colour).split("\n")
    return "\n".join(out)


def choices(text: str, width: int, indent: str = "  ") -> list[str]:
    """``text`` as it stands when it fits in ``width``; else, when it lists choices
    (``NAME=a|b|c``, no space in it), broken after a ``|`` into lines of at most
    ``width``, the continuations indented.  A choice longer than a line stands
    alone on its own; anything else is left whole (a key is never cut)."""
    if len(text) <= width or " " in text or "|" not in text:
        return [text]
    lines = [""]
    for piece in re.split(r"(?<=\|)", text):
        if lines[-1].strip() and len(lines[-1]) + len(piece) > width:
            lines.append(indent)
        lines[-1] += piece
    return lines


def _line(cells: list[str], widths: list[int], style: str, *, paint_cells: bool = False) -> str:
    padded = "  ".join(cell.ljust(w) for cell, w in zip(cells, widths, strict=True)).rstrip()
    if paint_cells:
        padded = paint(padded)
    return f"{style}{padded}{_RESET}" if style and padded else padded


def render_line(line: str, *, width: int, colour: bool) -> str:
    """One line of a result, wrapped to ``width`` (continuations indented under it)."""
    if len(line) <= width:
        return paint(line) if colour else line
    indent = " " * min(len(line) - len(line.lstrip(" ")) + 2, width // 2)
    parts = wrap_words(line, width, indent)
    text = "\n".join(parts)
    return paint(text) if colour else text


def wrap_words(text: str, width: int, indent: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` broken at spaces only: a path, an
    identifier or a command is never split (one longer than the line stands alone
    on its own, so that it still copies and pastes whole)."""
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=False, drop_whitespace=True) or [text]

