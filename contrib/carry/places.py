"""Where a patch makes its change, and what upstream has there: the anchored count.

A hunk's *place* is its file and the definition enclosing its change at the base
(:func:`contrib.carry.scope.enclosing`: a Python ``def``/``class``, a C/CUDA
function or type); a change outside every definition is placed in its file.  At
the target the place is the definition of that name whose body is most like the
base's (two ``forward`` methods stay apart), or the whole file.  A hunk's added
line counts as present only when the target's place has more copies of it than
the base's place had, and a removed line as gone only when the place has fewer.

Why: gate fixes repeat.  flashinfer's ``flashinfer/jit/comm.py`` has
``supported_major_versions=[9, 10, 12]`` three times; a patch that widens
``gen_mixed_comm_module`` is not landed because upstream widened
``gen_trtllm_comm_module`` sixteen lines below.  A file-wide count says it is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from contrib.carry.scope import TOP, definition, enclosing, extent, language
from contrib.carry.series import Hunk

_BARE = frozenset({"else:", "try:", "finally:", "pass", "return", "break", "continue",
                   "else", "default:", "#endif", "#else", "end", "fi", "done", "do", "then"})
_ALNUM = re.compile(r"[^\W_]")  # a letter or a digit, as str.isalnum() has it


def squash(line: str) -> str:
    """A line as compared: whitespace squashed."""
    return " ".join(line.split())


def meaningful(line: str) -> str:
    """The line as compared (whitespace squashed), or "" when it proves nothing:
    blank, brackets/punctuation only, or a bare keyword."""
    text = squash(line)
    if text in _BARE or not _ALNUM.search(text):
        return ""
    return text


@dataclass
class Place:
    """The lines one patch adds and removes at one place of one file."""

    path: str
    name: str = TOP  # the enclosing definition at the base
    start: int = -1  # the line it starts on at the base (-1: outside every definition)
    window: tuple[int, int] | None = None  # outside: the base lines it replaces [lo, hi)
    added: list[str] = field(default_factory=list)  # meaningful, squashed
    removed: list[str] = field(default_factory=list)
    raw_removed: list[str] = field(default_factory=list)  # stripped, for `git log -S`

    @property
    def label(self) -> str:
        if self.window is not None:
            return f"{self.path} (line {self.window[0] + 1})"
        return self.path if self.name == TOP else f"{self.path} ({self.name})"


class FileView:
    """One version of one file: its lines, squashed once, and its definitions by name."""

    def __init__(self, path: str, blob: bytes | None) -> None:
        self.path, self.lang = path, language(path)
        self.raw = blob.decode("utf-8", "replace").splitlines() if blob else []
        self.lines = [squash(x) for x in self.raw]
        self._defs: dict[str, list[int]] | None = None

    def region(self, start: int) -> list[str]:
        """The squashed lines of the definition starting on ``start`` (-1: the file)."""
        if start < 0 or start >= len(self.raw):
            return self.lines
        return self.lines[start:extent(self.raw, start, self.lang)]

    def find(self, name: str, like: Sequence[str]) -> list[str] | None:
        """The definition called ``name`` most like ``like`` (the base's), else None."""
        if self._defs is None:
            self._defs = {}
            for i, line in enumerate(self.raw):
                found = definition(line, self.lang, self.raw[i + 1] if i + 1 < len(self.raw)
                                   else "")
                if found:
                    self._defs.setdefault(found, []).append(i)
        starts = self._defs.get(name)
        if not starts:
            return None
        want = Counter(like)

        def shared(region: list[str]) -> int:
            return sum((Counter(region) & want).values())

        return max((self.region(i) for i in starts), key=shared)


def places_of(hunks: Sequence[Hunk], earlier: Sequence[Sequence[Hunk]],
              base: Mapping[str, FileView]) -> list[Place]:
    """The places of one patch's ``hunks`` (made on the base plus the ``earlier``
    patches of its series), with their :func:`meaningful` lines.  A line both removed
    and added in one file (moved) counts in neither."""
    found: dict[tuple[str, int], Place] = {}
    for hunk in hunks:
        view = base.get(hunk.path)
        raw = view.raw if view is not None else []
        index = _at_base(hunk.source_start + hunk.lead - 2, hunk.path, earlier)
        scope = _scope(raw, index, hunk) if raw else None
        if scope:
            place = found.setdefault((hunk.path, scope[1]), Place(hunk.path, *scope))
        elif raw:  # outside every definition: the lines it replaces, and no others
            window = _widened(raw, index + 1, index + 1 + len(hunk.removed))
            lo = window[0]
            place = found.setdefault((hunk.path, -2 - lo), Place(hunk.path, window=window))
        else:  # a file the base lacks: all of it
            place = found.setdefault((hunk.path, -1), Place(hunk.path))
        place.added += [m for m in map(meaningful, hunk.added) if m]
        place.removed += [m for m in map(meaningful, hunk.removed) if m]
        place.raw_removed += [r.strip() for r in hunk.removed if meaningful(r)]
    for path in {p.path for p in found.values()}:
        mine = [p for p in found.values() if p.path == path]
        moved = Counter(a for p in mine for a in p.added) & Counter(r for p in mine
                                                                    for r in p.removed)
        for lines in ([p.added for p in mine], [p.removed for p in mine]):
            left = Counter(moved)
            for kept in lines:
                kept[:] = _minus(kept, left)
    return [p for p in found.values() if p.added or p.removed]


def _scope(raw: Sequence[str], index: int, hunk: Hunk) -> tuple[str, int] | None:
    """The definition a hunk changes: the one whose first line it rewrites (a kernel's
    signature), else the one enclosing the line above its change."""
    lang, first = language(hunk.path), index + 1
    if hunk.removed and first < len(raw):
        name = definition(raw[first], lang, raw[first + 1] if first + 1 < len(raw) else "")
        if name:
            return name, first
    changed = next((x for x in (*hunk.removed, *hunk.added) if x.strip()), "")
    return enclosing(raw, index, lang, _indent(changed))


def _widened(raw: Sequence[str], lo: int, hi: int) -> tuple[int, int]:
    """[lo, hi) grown over the blank and bracket-only lines around it: where a diff puts
    an insertion among blank lines is a matter of alignment, not of place."""
    while lo > 0 and not meaningful(raw[lo - 1]):
        lo -= 1
    while hi < len(raw) and not meaningful(raw[hi]):
        hi += 1
    return lo, hi


def _minus(lines: list[str], left: Counter[str]) -> list[str]:
    """``lines`` without the copies ``left`` still holds (taken from it as they go)."""
    out = []
    for line in lines:
        if left[line] > 0:
            left[line] -= 1
        else:
            out.append(line)
    return out


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip()) if line.strip() else 1 << 30


def _at_base(index: int, path: str, earlier: Sequence[Sequence[Hunk]]) -> int:
    """Line ``index`` (0-based) of ``path`` after the ``earlier`` patches, at the base."""
    for hunks in reversed(earlier):
        shift, inside = 0, None
        for h in hunks:
            if h.path != path:
                continue
            if h.target_start + h.target_length - 1 <= index:
                shift += h.target_length - h.source_length
            elif h.target_start - 1 <= index:  # inside an earlier hunk: as far into it
                inside = h.source_start - 1 + min(index - h.target_start + 1, h.source_length)
                break
        index = inside if inside is not None else index - shift
    return max(index, 0)


@dataclass(frozen=True)
class Counted:
    """One place's count: its lines present and gone there."""

    present: Counter[str]
    gone: int

    def accounted(self, place: Place) -> bool:
        """Whether something of the change stands at its place: one of its added lines
        present there, or one of its removed lines gone from there."""
        return bool(place.added and sum(self.present.values())) or \
            bool(place.removed and self.gone)

    def whole(self, place: Place, threshold: float) -> bool:
        """Whether the place holds the change itself: ``threshold`` of its added lines
        present there and of its removed lines gone."""
        return sum(self.present.values()) >= threshold * len(place.added) and \
            self.gone >= threshold * len(place.removed)


Span = tuple[int, int, int, int]  # one hunk of upstream's -U0 diff: start, length at base, at target


def count(place: Place, now: FileView, then: FileView,
          upstream: Callable[[], Sequence[Span]]) -> Counted:
    """What stands at ``place`` at the target (``now``) against the base (``then``);
    ``upstream`` gives upstream's own diff of the file, base to target: for a place
    outside every definition, or a definition the target has under no such name, the
    place at the target is where upstream's diff puts the base's lines."""
    if place.window is not None:
        had, here = _through(place.window, then, now, upstream())
    else:
        had = then.region(place.start)
        found = now.lines if place.start < 0 else now.find(place.name, had)
        if found is None:  # renamed, or its first line rewritten past recognition
            end = place.start + len(had)
            had, here = _through((place.start, end), then, now, upstream())
        else:
            here = found
    have, before = Counter(here), Counter(had)
    # A line counts when the place has more of it than the base had: one that merely
    # existed there already proves nothing.
    present = Counter({line: min(n, have[line] - before[line])
                       for line, n in Counter(place.added).items()
                       if have[line] > before[line]})
    gone = sum(min(n, max(0, before[line] - have[line]))
               for line, n in Counter(place.removed).items())
    return Counted(present, gone)


def _through(window: tuple[int, int], then: FileView, now: FileView,
             upstream: Sequence[Span]) -> tuple[list[str], list[str]]:
    """The base's lines of ``window`` and the target's lines upstream's diff maps them to."""
    lo, hi = window
    a, b = _mapped(lo, hi, upstream)
    return then.lines[lo:hi], now.lines[a:b]


def _mapped(lo: int, hi: int, upstream: Sequence[Span]) -> tuple[int, int]:
    """Base lines [lo, hi) at the target: shifted by upstream's hunks above them, and
    widened to cover the hunks upstream made on them (for an insertion: right there)."""
    shift = grown = 0
    ends: list[int] = []
    for s, sl, t, tl in upstream:
        start, end = (s - 1, s - 1 + sl) if sl else (s, s)  # 0-based, end exclusive
        on = start <= hi and lo <= end  # on the lines, or right against them
        if on:
            tstart = t - 1 if tl else t
            ends += [tstart, tstart + tl]
            grown += tl - sl
        elif end <= lo:
            shift += tl - sl
    first, last = lo + shift, hi + shift + grown
    return min([first, *ends]), max([last, *ends])


def upstream_spans(diff: str) -> list[Span]:
    """The hunks of a ``git diff -U0``: (start, length) at the base and at the target."""
    return [(int(m[1]), int(m[2] or 1), int(m[3]), int(m[4] or 1)) for m in _SPAN.finditer(diff)]


_SPAN = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", re.M)
